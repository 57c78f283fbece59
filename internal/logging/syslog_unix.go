//go:build unix

package logging

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/syslog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap/zapcore"

	"github.com/xmq-io/xmq/internal/config"
)

// newSyslogCore logs to the syslog daemon target names (config.SyslogTarget),
// each entry one message at the priority of its level, facility daemon,
// tag xmq. The message is the entry's sentence (messageEncoder).
func newSyslogCore(target, format string, level zapcore.LevelEnabler) (zapcore.Core, io.Closer, error) {
	network, addr, err := config.SyslogTarget(target)
	if err != nil {
		return nil, nil, err
	}
	w, err := syslog.Dial(network, addr, syslog.LOG_DAEMON|syslog.LOG_INFO, "xmq")
	if err != nil && network == "unixgram" {
		w, err = syslog.Dial("unix", addr, syslog.LOG_DAEMON|syslog.LOG_INFO, "xmq") // a stream socket
	}
	if err != nil {
		return nil, nil, err
	}
	emit := func(ent zapcore.Entry, msg []byte, _ []zapcore.Field) error {
		m := string(msg)
		switch {
		case ent.Level <= zapcore.DebugLevel:
			return w.Debug(m)
		case ent.Level == zapcore.InfoLevel:
			return w.Info(m)
		case ent.Level == zapcore.WarnLevel:
			return w.Warning(m)
		case ent.Level == zapcore.ErrorLevel:
			return w.Err(m)
		}
		return w.Crit(m)
	}
	return &sinkCore{LevelEnabler: level, enc: messageEncoder(format, true), emit: emit}, w, nil
}

// newJournalCore logs to the systemd journal at socket in its native
// protocol: one datagram per entry with MESSAGE (the sentence), PRIORITY,
// SYSLOG_IDENTIFIER=xmq, XMQ_LOGGER and every field of the entry as a
// journal field of its name in capitals (CLIENT_ID, REMOTE, …), so
// `journalctl CLIENT_ID=sensor-7` finds a client's lines.
func newJournalCore(socket string, level zapcore.LevelEnabler) (zapcore.Core, io.Closer, error) {
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		return nil, nil, fmt.Errorf("the journal's socket: %w (is this a systemd machine? log.syslog or log.file instead)", err)
	}
	emit := func(ent zapcore.Entry, msg []byte, fields []zapcore.Field) error {
		var b bytes.Buffer
		journalField(&b, "MESSAGE", string(msg))
		journalField(&b, "PRIORITY", strconv.Itoa(journalPriority(ent.Level)))
		journalField(&b, "SYSLOG_IDENTIFIER", "xmq")
		if ent.LoggerName != "" {
			journalField(&b, "XMQ_LOGGER", ent.LoggerName)
		}
		m := zapcore.NewMapObjectEncoder()
		for _, f := range fields {
			f.AddTo(m)
		}
		for _, k := range slices.Sorted(maps.Keys(m.Fields)) {
			journalField(&b, journalName(k), fmt.Sprint(m.Fields[k]))
		}
		_, err := conn.Write(b.Bytes())
		return err
	}
	return &sinkCore{LevelEnabler: level, enc: messageEncoder("console", false), emit: emit}, conn, nil
}

// journalField appends one field in the native protocol: NAME=value, or
// for a value with a newline NAME, its length (64-bit little endian) and
// the value.
func journalField(b *bytes.Buffer, name, value string) {
	if !strings.Contains(value, "\n") {
		b.WriteString(name + "=" + value + "\n")
		return
	}
	b.WriteString(name + "\n")
	_ = binary.Write(b, binary.LittleEndian, uint64(len(value)))
	b.WriteString(value + "\n")
}

// journalName makes a zap field name a journal field name: capitals,
// digits and underscores, not starting with an underscore (those are the
// journal's own) or a digit.
func journalName(k string) string {
	n := []byte(strings.ToUpper(k))
	for i, c := range n {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			n[i] = '_'
		}
	}
	if len(n) == 0 || n[0] == '_' || n[0] >= '0' && n[0] <= '9' {
		return "X" + string(n)
	}
	return string(n)
}

// journalPriority is syslog's priority of a level.
func journalPriority(l zapcore.Level) int {
	switch {
	case l <= zapcore.DebugLevel:
		return 7
	case l == zapcore.InfoLevel:
		return 6
	case l == zapcore.WarnLevel:
		return 4
	case l == zapcore.ErrorLevel:
		return 3
	}
	return 2
}
