package config

import (
	"strings"
	"testing"
)

// TestSyslogTarget: log.syslog's forms, and the errors that name the fix.
func TestSyslogTarget(t *testing.T) {
	for _, tt := range []struct{ in, network, addr, err string }{
		{"local", "", "", ""},
		{"udp://logs.example:514", "udp", "logs.example:514", ""},
		{"tcp://10.0.0.1:514", "tcp", "10.0.0.1:514", ""},
		{"unix:///dev/log", "unixgram", "/dev/log", ""},
		{"udp://logs.example", "", "", "want udp://host:port"},
		{"logs.example:514", "", "", "want local, udp://"},
		{"http://x:1", "", "", "scheme http"},
	} {
		n, a, err := SyslogTarget(tt.in)
		if n != tt.network || a != tt.addr || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("syslogTarget(%q) = %q, %q, %v; want %q, %q, %q", tt.in, n, a, err, tt.network, tt.addr, tt.err)
		}
	}
}
