package mosquitto

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// This file reads a Mosquitto configuration (mosquitto.conf(5), Mosquitto
// 2.0) into the shape Mosquitto itself gives it: global options, the
// default listener, the listeners, the security options (global, or per
// listener with per_listener_settings true) and the bridges. import.go
// turns that into xmq's configuration.

// mosqLine is one option line of a Mosquitto configuration file; n 0
// stands for a whole file.
type mosqLine struct {
	file  string
	n     int
	key   string
	value string // the rest of the line, blanks trimmed
}

// where is "file:line" for comments.
func (l mosqLine) where() string { return fmt.Sprintf("%s:%d", filepath.Base(l.file), l.n) }

// quoted is the line as a comment names it: where it is and what it says,
// as far as shown shows it.
func (l mosqLine) quoted() string {
	if l.n == 0 {
		return filepath.Base(l.file)
	}
	return l.where() + ": " + l.shown()
}

// shown is the line as a comment quotes it, with secrets left out.
func (l mosqLine) shown() string {
	if l.key == "" {
		return "(no option name; the line is not shown)"
	}
	if l.value == "" {
		return l.key
	}
	if mosqSecret(l.key) {
		return l.key + " <redacted>"
	}
	return l.key + " " + l.value
}

// mosqSecret reports the options whose value must not be copied into the
// generated file's comments: passwords, keys and plugin options (which
// often hold database credentials).
func mosqSecret(key string) bool {
	switch key {
	case "remote_password", "password", "local_password", "bridge_psk", "tls_engine_kpass_sha1":
		return true
	}
	return strings.HasPrefix(key, "auth_opt_") || strings.HasPrefix(key, "plugin_opt_")
}

// Kinds of Mosquitto options: where an option line applies.
type mosqKind int

const (
	mosqGlobal   mosqKind = iota // the whole broker
	mosqListener                 // the current listener (the default listener before the first `listener`)
	mosqSecurity                 // global, or the current listener with per_listener_settings true
	mosqBridge                   // the current bridge (after `connection`)
)

// mosqOptions is every option of Mosquitto 2.0's mosquitto.conf(5) and
// src/conf.c, with where it applies. docs/migrating-from-mosquitto.md
// covers each one; a test keeps the two in step.
var mosqOptions = map[string]mosqKind{
	// General options.
	"acl_file": mosqSecurity, "allow_anonymous": mosqSecurity, "allow_duplicate_messages": mosqGlobal,
	"allow_zero_length_clientid": mosqSecurity, "auth_opt_*": mosqSecurity, "auth_plugin": mosqSecurity,
	"auth_plugin_deny_special_chars": mosqSecurity, "auto_id_prefix": mosqSecurity,
	"autosave_interval": mosqGlobal, "autosave_on_changes": mosqGlobal, "check_retain_source": mosqGlobal,
	"clientid_prefixes": mosqGlobal, "connection_messages": mosqGlobal, "include_dir": mosqGlobal,
	"log_dest": mosqGlobal, "log_facility": mosqGlobal, "log_timestamp": mosqGlobal,
	"log_timestamp_format": mosqGlobal, "log_type": mosqGlobal, "max_inflight_bytes": mosqGlobal,
	"max_inflight_messages": mosqGlobal, "max_keepalive": mosqGlobal, "max_packet_size": mosqGlobal,
	"max_queued_bytes": mosqGlobal, "max_queued_messages": mosqGlobal, "memory_limit": mosqGlobal,
	"message_size_limit": mosqGlobal, "password_file": mosqSecurity, "per_listener_settings": mosqGlobal,
	"persistence": mosqGlobal, "persistence_file": mosqGlobal, "persistence_location": mosqGlobal,
	"persistent_client_expiration": mosqGlobal, "pid_file": mosqGlobal, "plugin": mosqSecurity,
	"plugin_opt_*": mosqSecurity, "psk_file": mosqSecurity, "queue_qos0_messages": mosqGlobal,
	"retain_available": mosqGlobal, "retained_persistence": mosqGlobal, "retry_interval": mosqGlobal,
	"set_tcp_nodelay": mosqGlobal, "sys_interval": mosqGlobal, "upgrade_outgoing_qos": mosqGlobal,
	"user": mosqGlobal, "websockets_headers_size": mosqGlobal, "websockets_log_level": mosqGlobal,
	// Listeners.
	"bind_address": mosqListener, "bind_interface": mosqListener, "http_dir": mosqListener,
	"listener": mosqListener, "max_connections": mosqListener, "max_qos": mosqListener,
	"maximum_qos": mosqListener, "max_topic_alias": mosqListener, "mount_point": mosqListener,
	"port": mosqListener, "protocol": mosqListener, "socket_domain": mosqListener,
	"use_username_as_clientid": mosqListener,
	// Listener TLS.
	"cafile": mosqListener, "capath": mosqListener, "certfile": mosqListener, "ciphers": mosqListener,
	"ciphers_tls1.3": mosqListener, "crlfile": mosqListener, "dhparamfile": mosqListener,
	"keyfile": mosqListener, "require_certificate": mosqListener, "tls_engine": mosqListener,
	"tls_engine_kpass_sha1": mosqListener, "tls_keyform": mosqListener, "tls_version": mosqListener,
	"use_identity_as_username": mosqListener, "use_subject_as_username": mosqListener,
	"psk_hint": mosqListener,
	// Bridges.
	"connection": mosqBridge, "address": mosqBridge, "addresses": mosqBridge,
	"bridge_attempt_unsubscribe": mosqBridge, "bridge_bind_address": mosqBridge,
	"bridge_max_packet_size": mosqBridge, "bridge_outgoing_retain": mosqBridge,
	"bridge_protocol_version": mosqBridge, "cleansession": mosqBridge, "local_cleansession": mosqBridge,
	"keepalive_interval": mosqBridge, "idle_timeout": mosqBridge, "local_clientid": mosqBridge,
	"local_password": mosqBridge, "local_username": mosqBridge, "notifications": mosqBridge,
	"notifications_local_only": mosqBridge, "notification_topic": mosqBridge, "remote_clientid": mosqBridge,
	"clientid": mosqBridge, "remote_password": mosqBridge, "password": mosqBridge,
	"remote_username": mosqBridge, "username": mosqBridge, "restart_timeout": mosqBridge,
	"round_robin": mosqBridge, "start_type": mosqBridge, "threshold": mosqBridge, "topic": mosqBridge,
	"try_private": mosqBridge, "bridge_alpn": mosqBridge, "bridge_cafile": mosqBridge,
	"bridge_capath": mosqBridge, "bridge_certfile": mosqBridge, "bridge_identity": mosqBridge,
	"bridge_insecure": mosqBridge, "bridge_keyfile": mosqBridge, "bridge_psk": mosqBridge,
	"bridge_require_ocsp": mosqBridge, "bridge_tls_version": mosqBridge,
}

// mosqUnknown is an unknown option line as the import keeps it: the
// option's name when it has the shape of one, never the value. The line
// may be in a file that is no Mosquitto configuration (include_dir reads
// any *.conf: /etc holds dozens), or be a secret option misspelt
// (remote_pasword): its text is not for the output.
func mosqUnknown(l mosqLine) mosqLine {
	l.value = ""
	if !mosqOptionName(l.key) {
		l.key = ""
	}
	return l
}

// mosqOptionName reports whether key has the shape of a Mosquitto option
// name: a lower-case letter, then lower-case letters, digits, '_' and '.',
// 64 at most.
func mosqOptionName(key string) bool {
	if key == "" || len(key) > 64 || key[0] < 'a' || key[0] > 'z' {
		return false
	}
	for _, c := range []byte(key) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// mosqKindOf is the kind of an option; ok is false for an unknown one.
func mosqKindOf(key string) (mosqKind, bool) {
	switch {
	case strings.HasPrefix(key, "auth_opt_"):
		key = "auth_opt_*"
	case strings.HasPrefix(key, "plugin_opt_"):
		key = "plugin_opt_*"
	}
	k, ok := mosqOptions[key]
	return k, ok
}

// mosqListenerConf is a Mosquitto listener: its `listener` line (none for
// the default listener) and its options, the last line of each.
type mosqListenerConf struct {
	at    *mosqLine
	opts  map[string]mosqLine
	order []string // option keys, first use first
	sec   mosqSecurityConf
}

func (l *mosqListenerConf) set(line mosqLine) {
	if l.opts == nil {
		l.opts = map[string]mosqLine{}
	}
	if _, ok := l.opts[line.key]; !ok {
		l.order = append(l.order, line.key)
	}
	l.opts[line.key] = line
}

func (l *mosqListenerConf) opt(key string) (mosqLine, bool) {
	v, ok := l.opts[key]
	return v, ok
}

// mosqSecurityConf holds the security options of one scope.
type mosqSecurityConf struct {
	opts  map[string]mosqLine
	other []mosqLine // plugins and their options, in order
}

func (s *mosqSecurityConf) set(line mosqLine) {
	switch line.key {
	case "password_file", "acl_file", "allow_anonymous", "psk_file", "allow_zero_length_clientid", "auto_id_prefix":
		if s.opts == nil {
			s.opts = map[string]mosqLine{}
		}
		s.opts[line.key] = line
	default:
		s.other = append(s.other, line)
	}
}

func (s *mosqSecurityConf) opt(key string) (mosqLine, bool) {
	v, ok := s.opts[key]
	return v, ok
}

// mosqBridgeConf is a `connection` and the bridge options after it.
type mosqBridgeConf struct {
	name  mosqLine
	lines []mosqLine
}

// Conf is a whole Mosquitto configuration as Mosquitto reads it.
type Conf struct {
	global      map[string]mosqLine // the last line of each global option
	globalOrder []mosqLine          // every global line, in order (log_dest and log_type repeat)
	perListener bool
	security    mosqSecurityConf // per_listener_settings false
	def         mosqListenerConf // options before the first `listener`
	listeners   []*mosqListenerConf
	bridges     []*mosqBridgeConf
	// localOnly: no listener, port or bind_address line, so Mosquitto
	// listens on the loopback interface only and allows anonymous clients.
	localOnly bool
	unknown   []mosqLine // as mosqUnknown keeps them
	misplaced []mosqLine // a bridge option before any `connection`
	includes  []string   // files read through include_dir
	foreign   []string   // files of include_dir in which no line is an option: not listed line by line
}

// MaxConfBytes is the most xmq import reads: the main file and its
// include_dir files together. A Mosquitto configuration is kilobytes, a
// very large one a few MiB; past this the file is something else (a log, a
// device, a directory of data given by mistake) and reading on would only
// cost memory: the import holds every option line until it writes.
const MaxConfBytes = 16 << 20

// mosqMaxLine is the longest line read; Mosquitto's own buffer grows as
// needed, but no option's value comes near this.
const mosqMaxLine = 1 << 20

// ReadConf reads path, and the files of its include_dir lines,
// the way Mosquitto does, line by line, MaxConfBytes at most.
func ReadConf(path string) (*Conf, error) {
	c := &Conf{global: map[string]mosqLine{}, localOnly: true}
	var cur *mosqListenerConf = &c.def
	var bridge *mosqBridgeConf
	budget := int64(MaxConfBytes)
	var read func(path string, top bool) error
	read = func(path string, top bool) error {
		known, first := 0, len(c.unknown)
		err := readMosqLines(path, &budget, func(l mosqLine) error {
			kind, ok := mosqKindOf(l.key)
			if !ok {
				c.unknown = append(c.unknown, mosqUnknown(l))
				return nil
			}
			known++
			switch {
			case l.key == "include_dir":
				c.global[l.key] = l
				c.globalOrder = append(c.globalOrder, l)
				if !top {
					return nil // Mosquitto reads include_dir only in the main file
				}
				files, err := mosqIncludeFiles(l.value)
				if err != nil && !filepath.IsAbs(l.value) {
					// Mosquitto resolves a relative directory from its
					// working directory; the import may run elsewhere.
					files, err = mosqIncludeFiles(filepath.Join(filepath.Dir(path), l.value))
				}
				if err != nil {
					return fmt.Errorf("%s: include_dir: %w", l.where(), err)
				}
				// Refuse a directory too large before reading any of it.
				total := int64(0)
				for _, f := range files {
					if total += f.size; total > budget {
						return fmt.Errorf("%s: include_dir: %w", l.where(), mosqTooLarge(f.path, f.size > MaxConfBytes))
					}
				}
				for _, f := range files {
					c.includes = append(c.includes, f.path)
					if err := read(f.path, false); err != nil {
						return err
					}
				}
			case l.key == "per_listener_settings":
				c.global[l.key] = l
				c.globalOrder = append(c.globalOrder, l)
				c.perListener = mosqBool(l.value)
			case l.key == "listener":
				c.localOnly = false
				at := l
				cur = &mosqListenerConf{at: &at}
				c.listeners = append(c.listeners, cur)
			case l.key == "port" || l.key == "bind_address":
				c.localOnly = false
				c.def.set(l) // they configure the default listener wherever they are
			case kind == mosqListener:
				cur.set(l)
			case kind == mosqSecurity:
				if c.perListener {
					cur.sec.set(l)
				} else {
					c.security.set(l)
				}
			case l.key == "connection":
				bridge = &mosqBridgeConf{name: l}
				c.bridges = append(c.bridges, bridge)
			case kind == mosqBridge:
				if bridge == nil {
					c.misplaced = append(c.misplaced, l)
				} else {
					bridge.lines = append(bridge.lines, l)
				}
			default:
				c.global[l.key] = l
				c.globalOrder = append(c.globalOrder, l)
			}
			return nil
		})
		if err != nil {
			return err
		}
		// A file with lines and no option in them is something else: say
		// so once. Its unknown lines are the last ones, as a file with no
		// option has no include_dir either.
		if known == 0 && len(c.unknown) > first {
			if top {
				return fmt.Errorf("%s: no line of it is a Mosquitto option: is it a Mosquitto configuration?", path)
			}
			c.unknown = c.unknown[:first]
			c.foreign = append(c.foreign, path)
		}
		return nil
	}
	if err := read(path, true); err != nil {
		return nil, err
	}
	return c, nil
}

// mosqTooLarge is the error for a file that takes the import past
// MaxConfBytes: alone (whole), or with the files read before it.
func mosqTooLarge(path string, whole bool) error {
	if whole {
		return fmt.Errorf("%s is larger than %d MiB, the most xmq import reads: is it a Mosquitto configuration?", path, MaxConfBytes>>20)
	}
	return fmt.Errorf("%s takes the configuration and its include_dir files past %d MiB, the most xmq import reads", path, MaxConfBytes>>20)
}

// readMosqLines calls fn with each option line of the file at path, as it
// reads it, and takes the bytes read from *budget: a file larger than
// what is left is refused before it is read when its size is known, as
// soon as the budget runs out otherwise (a pipe, a device).
func readMosqLines(path string, budget *int64, fn func(mosqLine) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > *budget {
		return mosqTooLarge(path, fi.Size() > MaxConfBytes || *budget == MaxConfBytes)
	}
	return scanMosqLines(f, path, budget, fn)
}

// scanMosqLines splits r into option lines. As in Mosquitto, a line whose
// first character is '#' is a comment, the option name ends at the first
// blank and the value is the rest of the line. It reads at most *budget
// bytes and one more, to tell a file that ends there from one that goes
// on, and takes them from *budget as it reads: the include_dir files that
// fn reads come out of the same budget.
func scanMosqLines(r io.Reader, path string, budget *int64, fn func(mosqLine) error) error {
	whole := *budget == MaxConfBytes
	sc := bufio.NewScanner(&budgetReader{r, budget})
	sc.Buffer(make([]byte, 0, 64<<10), mosqMaxLine)
	n := 0
	for sc.Scan() {
		if *budget < 0 {
			return mosqTooLarge(path, whole)
		}
		n++
		t := strings.TrimRight(sc.Text(), "\r")
		if strings.HasPrefix(t, "#") {
			continue
		}
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		key, value, _ := strings.Cut(t, " ")
		if i := strings.IndexAny(key, "\t"); i >= 0 {
			key, value = t[:i], t[i+1:]
		}
		if err := fn(mosqLine{file: path, n: n, key: key, value: strings.TrimSpace(value)}); err != nil {
			return err
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("%s:%d: a line longer than %d MiB: is it a Mosquitto configuration?", path, n+1, mosqMaxLine>>20)
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case *budget < 0:
		return mosqTooLarge(path, whole)
	}
	return nil
}

// budgetReader reads from r no more than *left bytes and one more, and
// takes what it reads from *left: below zero, the input was too large.
type budgetReader struct {
	r    io.Reader
	left *int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if *b.left < 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > *b.left+1 {
		p = p[:*b.left+1]
	}
	n, err := b.r.Read(p)
	*b.left -= int64(n)
	return n, err
}

// mosqInclude is a file include_dir reads, and its size.
type mosqInclude struct {
	path string
	size int64
}

// mosqIncludeFiles lists the files of dir that Mosquitto reads: those
// whose name ends in .conf after at least one character, in its order
// (mosqNameOrder). Directories and other files that are not regular are
// left out: Mosquitto could not read them as a configuration either, and
// opening a named pipe would wait for a writer.
func mosqIncludeFiles(dir string) ([]mosqInclude, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []mosqInclude
	for _, e := range entries {
		if len(e.Name()) <= len(".conf") || !strings.HasSuffix(e.Name(), ".conf") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Stat(p) // through a symbolic link, as Mosquitto's fopen goes
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		out = append(out, mosqInclude{p, fi.Size()})
	}
	slices.SortFunc(out, func(a, b mosqInclude) int {
		return mosqNameOrder(filepath.Base(a.path), filepath.Base(b.path))
	})
	return out, nil
}

// mosqNameOrder compares file names as Mosquitto sorts include_dir
// (scmp_p in src/conf.c): at the first place they differ, by the
// characters in upper case, then by the characters themselves; a name
// before the longer names it begins. So "Ab.conf" < "a.conf" < "aB.conf"
// < "a_x.conf" < "_.conf": the order decides which of two files setting
// one option wins. Bytes past ASCII compare unsigned (Mosquitto's char may
// be signed, as on x86: it then sorts such names first).
func mosqNameOrder(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		ua, ub := a[i], b[i]
		if 'a' <= ua && ua <= 'z' {
			ua -= 'a' - 'A'
		}
		if 'a' <= ub && ub <= 'z' {
			ub -= 'a' - 'A'
		}
		if ua != ub {
			return int(ua) - int(ub)
		}
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return len(a) - len(b)
}

// mosqBool parses a Mosquitto boolean: true or 1.
func mosqBool(v string) bool { return v == "true" || v == "1" }

// errNotBool is a boolean option with another value.
var errNotBool = errors.New("not true or false")

// mosqBoolStrict parses a boolean and rejects anything else.
func mosqBoolStrict(v string) (bool, error) {
	switch v {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, errNotBool
}
