package config

import (
	"fmt"
	"net/url"
)

// Log configures the logger.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // auto, console, json
	// File writes the log to this file instead of standard error, rotated
	// when it reaches MaxSizeMB; MaxBackups rotated files are kept (0: all),
	// none older than MaxAgeDays (0: any age), gzipped with Compress.
	File       string `yaml:"file"`
	MaxSizeMB  int    `yaml:"max_size_mb"`
	MaxBackups int    `yaml:"max_backups"`
	MaxAgeDays int    `yaml:"max_age_days"`
	Compress   bool   `yaml:"compress"`
	// Syslog sends the log to syslog: "local" (this machine's daemon),
	// udp://host:port, tcp://host:port or unix:///path; "" off. Unix only.
	Syslog string `yaml:"syslog"`
	// Journald sends the log to the systemd journal in its native
	// protocol, every field a journal field. Linux only.
	Journald bool `yaml:"journald"`
}

// Log defaults that are not zero.
const (
	defaultLogMaxSizeMB  = 100
	defaultLogMaxBackups = 10
)

// validateLogOutputs checks the outputs' settings.
func (c *Config) validateLogOutputs(ps *Problems) {
	lp := Path("log")
	if c.Log.File != "" {
		if c.Log.MaxSizeMB < 1 {
			ps.Add(lp.With("max_size_mb"), "%d: a file is rotated at 1 MB or more", c.Log.MaxSizeMB)
		}
		if c.Log.MaxBackups < 0 || c.Log.MaxAgeDays < 0 {
			ps.Add(lp, "max_backups and max_age_days must not be negative (0 keeps every file, of any age)")
		}
	}
	if c.Log.Syslog != "" {
		if _, _, err := SyslogTarget(c.Log.Syslog); err != nil {
			ps.Add(lp.With("syslog"), "%v", err)
		}
	}
}

// SyslogTarget turns log.syslog into log/syslog's network and address:
// "local" is this machine's daemon ("", ""); udp://, tcp:// and unix://
// name a daemon.
func SyslogTarget(s string) (network, addr string, err error) {
	if s == "local" {
		return "", "", nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "", "", fmt.Errorf("%q: want local, udp://host:port, tcp://host:port or unix:///path", s)
	}
	switch u.Scheme {
	case "udp", "tcp":
		if u.Host == "" || u.Port() == "" {
			return "", "", fmt.Errorf("%q: want %s://host:port (syslog's port is usually 514)", s, u.Scheme)
		}
		return u.Scheme, u.Host, nil
	case "unix":
		if u.Path == "" {
			return "", "", fmt.Errorf("%q: want unix:///path/of/the/socket (e.g. unix:///dev/log)", s)
		}
		return "unixgram", u.Path, nil
	}
	return "", "", fmt.Errorf("%q: scheme %s: want local, udp://, tcp:// or unix://", s, u.Scheme)
}
