// Package config owns keyshard's configuration file: the ks.yaml types, a
// strict decoder, the defaults and Validate. It imports nothing from the
// project; every other package reads a *Config that Parse has already
// checked, so they never re-validate and never see a zero value where a
// default was meant.
//
// # Compatibility
//
// keyshard reads kingshard's ks.yaml unchanged. Besides the current
// kingshard keys (user_list, schema_list) the decoder accepts the older
// forms kingshard's own sample files used: top-level user/password and
// ups, a single schema object (schema) or a one-item schemas list with a
// rules block, and the node keys idle_conns and rw_split. They are mapped
// onto the current types by legacy.go and announced as warnings.
//
// # Strictness
//
// kingshard decoded with yaml.v2 into structs, so a misspelt key was
// silently dropped and the proxy started with a default in its place. Here
// the file is walked as a yaml.Node tree: an unknown key, a duplicate key, a
// value of the wrong type and every Validate failure is an *Error that names
// the file, the line and the key path (nodes[1].master). All problems are
// reported at once, sorted by line, joined with errors.Join.
//
// # Warnings
//
// A key that decodes and validates but whose feature is not built gets one
// warning per place it is set; the list lives in one table,
// notYetSupported in warnings.go (empty today: every key is in force), so
// a feature lands by deleting its row. Keys that are legal but probably
// not meant (a schema whose user is not in user_list) are warned about by
// lint.
//
// # Lifecycle
//
// Parse: decode, map legacy forms, apply defaults, Validate. The result is
// treated as immutable afterwards: a reload parses a new *Config and swaps the
// pointer, it never edits a live one. The accessors (UserPassword, SchemaFor,
// Node, IsAdmin) only read and are safe for concurrent use.
package config
