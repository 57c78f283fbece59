package main

import (
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newLogger builds the process logger writing to w. Format "auto" picks
// console output when w is a terminal and JSON otherwise.
func newLogger(w io.Writer, c logConfig) (*zap.Logger, error) {
	var level zapcore.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	format := c.Format
	if format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "console"
		}
	}
	var enc zapcore.Encoder
	switch format {
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout("2006-01-02 15:04:05.000")
		if isTerminal(w) {
			ec.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		enc = zapcore.NewConsoleEncoder(ec)
	case "json":
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		ec.EncodeDuration = zapcore.StringDurationEncoder
		enc = zapcore.NewJSONEncoder(ec)
	default:
		return nil, fmt.Errorf("log format %q: want auto, console or json", c.Format)
	}
	ws := zapcore.Lock(zapcore.AddSync(w))
	return zap.New(zapcore.NewCore(enc, ws, level), zap.ErrorOutput(ws)), nil
}

// isTerminal reports whether w is a character device such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
