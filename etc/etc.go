// Package etc holds the sample configuration, documented key by key;
// `keyshard help config` prints it.
package etc

import _ "embed"

// KSYAML is etc/ks.yaml: every key with its default and meaning.
//
//go:embed ks.yaml
var KSYAML string
