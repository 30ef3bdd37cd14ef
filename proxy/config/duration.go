package config

import (
	"fmt"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written as "5s", "100ms" (time.ParseDuration)
// or as a bare integer meaning milliseconds, the unit kingshard uses for
// slow_log_time.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// ParseDuration parses s as a Duration.
func ParseDuration(s string) (Duration, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms > int64(time.Duration(1<<63-1)/time.Millisecond) || ms < -int64(time.Duration(1<<63-1)/time.Millisecond) {
			return 0, fmt.Errorf("duration %q out of range", s)
		}
		return Duration(time.Duration(ms) * time.Millisecond), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: want e.g. 5s, 100ms or an integer of milliseconds", s)
	}
	return Duration(v), nil
}

// UnmarshalYAML lets Duration be decoded by plain yaml.Unmarshal too.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration", n.Line)
	}
	if n.Tag == "!!null" {
		*d = 0
		return nil
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*d = v
	return nil
}

// MarshalYAML writes the time.ParseDuration form.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }
