package config

import (
	"strings"
	"testing"
	"time"
)

// failover_after: off by default, a duration of 1s or more when set; a
// node without a slave only warns (a failover leaves a node of one
// replica with none, and the config it saves must load).
func TestFailoverAfter(t *testing.T) {
	c, warns := mustParse(t, minimal)
	if c.Nodes[0].FailoverAfter != 0 || len(warns) != 0 {
		t.Fatalf("default failover_after = %v, warnings %q", c.Nodes[0].FailoverAfter, warns)
	}
	c, warns = mustParse(t, minimal+"    slave: 127.0.0.1:3309\n    failover_after: 5s\n")
	if c.Nodes[0].FailoverAfter.D() != 5*time.Second || len(warns) != 0 {
		t.Fatalf("failover_after = %v, warnings %q", c.Nodes[0].FailoverAfter, warns)
	}
	_, warns = mustParse(t, minimal+"    failover_after: 5s\n")
	if !hasWarning(warns, "test.yaml:9: nodes[0].failover_after: node node1 has no slave") {
		t.Errorf("no warning for failover_after without a slave: %q", warns)
	}
	for _, bad := range []string{"500ms", "-1s"} {
		_, _, err := Parse([]byte(minimal+"    slave: 127.0.0.1:3309\n    failover_after: "+bad+"\n"), "test.yaml")
		if err == nil || !strings.Contains(err.Error(), "failover_after: want 0 (off) or at least 1s") {
			t.Errorf("failover_after %s: %v", bad, err)
		}
	}
}
