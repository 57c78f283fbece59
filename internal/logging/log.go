package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/xmq-io/xmq/internal/config"
)

// journalSocket is where journald takes native-protocol datagrams; tests
// point it elsewhere.
var journalSocket = "/run/systemd/journal/socket"

// Logger is the process logger with what a reload may change (the level)
// and what the end of the run must close (a log file, a syslog
// connection).
type Logger struct {
	*zap.Logger
	level   zap.AtomicLevel
	closers []io.Closer
}

// SetLevel changes the level of every output, live (log.level on a
// reload).
func (l *Logger) SetLevel(level zapcore.Level) { l.level.SetLevel(level) }

// Close flushes and closes the outputs; nothing is logged after it.
func (l *Logger) Close() {
	_ = l.Sync()
	for _, c := range l.closers {
		_ = c.Close()
	}
}

// logFileMode is a new log file's mode: the owner writes, its group reads.
const logFileMode = 0o640

// New builds the process logger: to w (standard error) unless the
// configuration names a file, syslog or the journal, to each of those
// then. Format "auto" picks console output when w is a terminal and JSON
// otherwise (a file gets JSON); console output writes the broker's events
// as sentences (sentenceEncoder).
func New(w io.Writer, c config.Log) (*Logger, error) {
	level, err := zap.ParseAtomicLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	l := &Logger{level: level}
	var cores []zapcore.Core
	fail := func(err error) (*Logger, error) {
		for _, c := range l.closers {
			_ = c.Close()
		}
		return nil, err
	}
	if c.File != "" {
		// lumberjack makes a new file 0600 and gives every file after it
		// the mode of the one before: make the first one readable by the
		// file's group (an operator's adm), as syslog's files are.
		if err := os.MkdirAll(filepath.Dir(c.File), 0o755); err == nil {
			if f, err := os.OpenFile(c.File, os.O_CREATE|os.O_EXCL|os.O_WRONLY, logFileMode); err == nil {
				_ = f.Chmod(logFileMode) // whatever the umask took away
				_ = f.Close()
			}
		}
		lj := &lumberjack.Logger{Filename: c.File, MaxSize: c.MaxSizeMB, MaxBackups: c.MaxBackups, MaxAge: c.MaxAgeDays,
			Compress: c.Compress, LocalTime: false}
		// Open now, so that a file that cannot be written stops the start.
		if _, err := lj.Write(nil); err != nil {
			return fail(fmt.Errorf("log.file: %w", err))
		}
		l.closers = append(l.closers, lj)
		enc, err := streamEncoder(c.Format, false)
		if err != nil {
			return fail(err)
		}
		cores = append(cores, zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(lj)), level))
	}
	if c.Syslog != "" {
		core, closer, err := newSyslogCore(c.Syslog, c.Format, level) // syslog_unix.go
		if err != nil {
			return fail(fmt.Errorf("log.syslog: %w", err))
		}
		l.closers = append(l.closers, closer)
		cores = append(cores, core)
	}
	if c.Journald {
		core, closer, err := newJournalCore(journalSocket, level) // syslog_unix.go
		if err != nil {
			return fail(fmt.Errorf("log.journald: %w", err))
		}
		l.closers = append(l.closers, closer)
		cores = append(cores, core)
	}
	if len(cores) == 0 {
		enc, err := streamEncoder(c.Format, isTerminal(w))
		if err != nil {
			return nil, err
		}
		ws := zapcore.Lock(zapcore.AddSync(w))
		cores = append(cores, zapcore.NewCore(enc, ws, level))
	}
	l.Logger = zap.New(zapcore.NewTee(cores...), zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(w))))
	return l, nil
}

// streamEncoder is the encoder of a stream output (standard error, a
// file): console (sentences, coloured on a terminal) or JSON; auto is
// console on a terminal.
func streamEncoder(format string, terminal bool) (zapcore.Encoder, error) {
	if format == "auto" {
		format = "json"
		if terminal {
			format = "console"
		}
	}
	switch format {
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("2006-01-02 15:04:05.000")
		if terminal {
			ec.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		return newSentenceEncoder(ec), nil
	case "json":
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		ec.EncodeDuration = zapcore.StringDurationEncoder
		return zapcore.NewJSONEncoder(ec), nil
	}
	return nil, fmt.Errorf("log format %q: want auto, console or json", format)
}

// messageEncoder encodes an entry's message and fields without time and
// level, for outputs that carry those themselves (syslog, the journal):
// a sentence, or JSON with format json; the logger's name only withName
// (the journal has its own field for it).
func messageEncoder(format string, withName bool) zapcore.Encoder {
	if format == "json" {
		ec := zap.NewProductionEncoderConfig()
		ec.TimeKey, ec.LevelKey = "", ""
		ec.EncodeDuration = zapcore.StringDurationEncoder
		return zapcore.NewJSONEncoder(ec)
	}
	ec := zap.NewDevelopmentEncoderConfig()
	ec.TimeKey, ec.LevelKey, ec.CallerKey = "", "", ""
	if !withName {
		ec.NameKey = ""
	}
	return newSentenceEncoder(ec)
}

// isTerminal reports whether w is a terminal (not merely a character
// device: /dev/null is one too).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// errNotSupported is the error of an output this platform does not have.
var errNotSupported = errors.New("not supported on this platform")
