package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"

	"github.com/xmq-io/xmq/listeners"
	"github.com/xmq-io/xmq/loadtest"
)

// usageError is a command line that cannot run; main exits 2 for it.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// assertError is a run that missed an -assert objective; main exits 1.
type assertError struct{ failed []loadtest.AssertResult }

// endedEarly is a run that stopped on an error its report already states
// (a note): main says only that, rather than print the error twice.
type endedEarly struct{ err error }

func (e endedEarly) Error() string { return "run ended early: " + e.err.Error() }
func (e endedEarly) Unwrap() error { return e.err }

func (e assertError) Error() string {
	parts := make([]string, len(e.failed))
	for i, a := range e.failed {
		parts[i] = fmt.Sprintf("%s [%s] got %s", a.Assertion, a.Case, a.Shown)
	}
	return "objectives missed: " + strings.Join(parts, "; ")
}

// errHelp reports that -h was asked for and the help printed.
var errHelp = flag.ErrHelp

// flagValues holds what the flags set; options turns it into loadtest.Options.
type flagValues struct {
	o          loadtest.Options
	levels     string
	payloads   string
	srcIPs     string
	scenario   string
	scale      float64
	jsonOut    bool
	report     string
	htmlOut    string
	metricsURL string
	brokerPID  int
	asserts    string
	agents     string
	progress   bool
	qos        int
	mode       string
}

// newFlagSet binds every flag to v, with the defaults the help shows.
func newFlagSet(v *flagValues, out io.Writer) *flag.FlagSet {
	d := loadtest.DefaultOptions()
	v.o = d
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(out)
	o := &v.o
	fs.StringVar(&o.Addr, "addr", d.Addr, "broker `HOST:PORT`, or a URL: mqtt://, mqtts://, ws://host:8083/mqtt, wss://, quic://; a comma-separated list (one transport) spreads the connections evenly over several brokers, such as a cluster's nodes")
	fs.StringVar(&o.SubAddr, "sub-addr", "", "subscribers connect to `HOST:PORT` or URL (or a list, as -addr) instead of -addr (same transport): measure through a bridge or across a cluster's nodes")
	fs.StringVar(&o.Transport, "transport", "", "`tcp|tls|ws|wss|quic` when -addr is HOST:PORT (default tcp); maps to mqtt, mqtts, ws, wss, quic URLs")
	fs.StringVar(&o.WSPath, "ws-path", d.WSPath, "WebSocket `PATH` for ws and wss")
	fs.BoolVar(&o.Insecure, "insecure", false, "do not verify the broker's TLS certificate (tls, wss, quic)")
	fs.BoolVar(&o.TLSResume, "tls-resume", false, "the connections share a TLS session cache and resume sessions (TLS 1.3 tickets): a reconnect storm of devices that kept theirs")
	fs.StringVar(&o.CAFile, "cafile", "", "PEM `FILE` of CA certificates to verify the broker with (xmq's development CA: data/certs/ca.pem)")
	fs.StringVar(&o.CertFile, "cert", "", "client certificate PEM `FILE` (with -key)")
	fs.StringVar(&o.KeyFile, "key", "", "client private key PEM `FILE` (with -cert)")
	fs.StringVar(&v.srcIPs, "src-ips", "", "spread connections over source `ADDRESSES`: a list and/or ranges, e.g. 127.0.0.2-127.0.0.20 or 127.0.0.2-20, to pass one address's ~28k ephemeral ports")
	fs.StringVar(&o.User, "user", "", "the MQTT user `NAME`")
	fs.StringVar(&o.Pass, "pass", "", "the MQTT `PASSWORD`")
	fs.StringVar(&o.MQTT, "mqtt", d.MQTT, "protocol `VERSION`: 5 or 3.1.1 (3.1 also works); 5 shows refused publishes by reason code, 3.1.1 cannot")
	fs.BoolVar(&o.Clean, "clean", d.Clean, "clean session / clean start; -clean=false keeps subscriber sessions (default false in p2p mode)")
	fs.DurationVar(&o.KeepAlive, "keepalive", d.KeepAlive, "MQTT keepalive `DURATION`; idle clients ping at half of it")
	fs.DurationVar(&o.ConnectTimeout, "connect-timeout", d.ConnectTimeout, "give dial + CONNECT → CONNACK, SUBACK and the liveness PINGREQ at most `DURATION`")
	fs.StringVar(&o.IDPrefix, "id-prefix", "", "client id `PREFIX` (ids are PREFIX-p0, -s0, -c0 …; default random lt######)")
	fs.StringVar(&v.mode, "mode", string(d.Mode), "what to measure: `conn|pub|pubsub|fanin|p2p` (see below)")
	fs.StringVar(&v.levels, "levels", "1000", "conn: connection counts `N,N,...`, one case each")
	fs.DurationVar(&o.Hold, "hold", d.Hold, "conn: hold each level for `DURATION` before the PINGREQ liveness check")
	fs.IntVar(&o.Wake, "wake", 0, "conn: after the liveness check, `N` times: all quiet for -wake-idle, then one PINGREQ timed on the next connection and one right after (busy); 0 = off")
	fs.DurationVar(&o.WakeIdle, "wake-idle", d.WakeIdle, "conn: every connection stays quiet for `DURATION` before each -wake round trip")
	fs.IntVar(&o.DialConcurrency, "dial-concurrency", d.DialConcurrency, "`N` dials in flight at once (1000 simultaneous overflow a loopback accept queue; 200 do not)")
	fs.Float64Var(&o.ConnRate, "conn-rate", 0, "`N` new connections per second (0 = as fast as -dial-concurrency allows)")
	fs.IntVar(&o.Pubs, "pubs", d.Pubs, "`N` publishers (p2p: pairs)")
	fs.IntVar(&o.Subs, "subs", d.Subs, "`N` subscribers (pubsub, fanin)")
	fs.IntVar(&v.qos, "qos", 0, "QoS `0|1|2` of publishes and subscriptions (fanin, p2p default 1)")
	fs.StringVar(&v.payloads, "payload", "64", "payload size in `BYTES`; a list such as 64,256,1024 sweeps sizes, one case each (timing needs ≥16)")
	fs.DurationVar(&o.Duration, "duration", d.Duration, "publish for `DURATION` per case, e.g. 30s or 5m; 0 = until Ctrl-C (then drain and report), with live progress")
	fs.Float64Var(&o.Rate, "rate", 0, "`N` messages per second per publisher; 0 = as fast as possible (fanin, p2p default 1)")
	fs.IntVar(&o.Inflight, "inflight", d.Inflight, "`N` unacknowledged QoS 1/2 messages per publisher: publishing is pipelined, not one at a time")
	fs.StringVar(&o.Topic, "topic", d.Topic, "publisher topic `PATTERN`; %i is the publisher's number, %c its client id, %u the -user")
	fs.StringVar(&o.SubTopic, "sub-topic", "", "subscriber filter `PATTERN`; %i is the subscriber's number, %c its client id, %u the -user (default: -topic with %i levels as +; fanin: $share/loadtest/…; p2p: the pair's topic)")
	fs.BoolVar(&o.Loop, "loop", false, "p2p: each connection publishes to and subscribes to its own topic")
	fs.DurationVar(&o.Churn, "churn", 0, "subscribers disconnect every `DURATION` and come back a fifth of it later (persistent with -clean=false)")
	fs.DurationVar(&o.Drain, "drain", d.Drain, "after publishing, wait at most `DURATION` for acks and deliveries")
	fs.StringVar(&v.scenario, "scenario", "", "run a published case by `NAME` (see below); later flags override its settings")
	fs.Float64Var(&v.scale, "scale", 1, "multiply a scenario's client counts by `FACTOR`, e.g. 0.01")
	fs.BoolVar(&v.jsonOut, "json", false, "print one JSON object with every figure and the environment instead of tables")
	fs.StringVar(&v.report, "report", "", "also write a markdown report to `FILE.md`")
	fs.StringVar(&v.htmlOut, "html", "", "also write a self-contained HTML report with SVG charts to `FILE.html`")
	fs.StringVar(&v.metricsURL, "metrics-url", "", "sample the broker's CPU and RSS from its Prometheus `URL` (process_cpu_seconds_total, process_resident_memory_bytes)")
	fs.IntVar(&v.brokerPID, "broker-pid", 0, "sample a local broker's CPU and RSS from /proc/`PID`")
	fs.StringVar(&v.asserts, "assert", "", "exit 1 when a case misses one of the `OBJECTIVES`, e.g. 'p99<5ms,loss=0,delivered>=0.99' (metrics below)")
	fs.StringVar(&v.agents, "agents", "", "split the load over `HOST:PORT,...` of `loadtest agent` processes; histograms are merged")
	fs.BoolVar(&v.progress, "progress", true, "print a progress line on stderr every second")
	fs.Usage = func() { usage(fs) }
	return fs
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `loadtest measures an MQTT broker: connections, ingest, end-to-end delivery.

Usage:
  loadtest [flags]                      run a test against -addr
  loadtest compare a.json b.json -html out.html
                                        put -json reports side by side (tcp against ws, xmq against Mosquitto)
  loadtest agent -listen :9090          serve a controller's share of the load
  loadtest sink -listen 127.0.0.1:1999  a discard broker, to measure the generator alone
  loadtest version                      print the version, commit, date, Go version and platform

Examples (the published commands):
  loadtest -addr HOST:1883 -user U -pass P -mode conn -levels 1000,10000,30000,50000 -hold 3s -dial-concurrency 200
  loadtest -addr HOST:1883 -user U -pass P -mode pub -pubs 10 -qos 0 -payload 64 -duration 10s
  loadtest -addr HOST:1883 -user U -pass P -mode pubsub -subs 10 -pubs 10 -qos 0 -rate 100 -payload 64 -duration 10s
  loadtest -addr wss://HOST:8084/mqtt -insecure -mode pubsub -qos 1 -assert 'p99<5ms,loss=0'
  loadtest -scenario sharesub-50K-500-50K-50K -scale 0.01 -duration 1m -html report.html

Flags:
`)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Modes:
  conn    ramp each -levels count with -dial-concurrency, CONNECT→CONNACK, hold -hold, check with PINGREQ;
          reports target, established, failed (and why), connect p50/p90/p99/p99.9; -wake 20 adds the
          round trip of a PINGREQ on a connection parked for -wake-idle (wake p50/p99/max) and on a busy one
  pub     -pubs publishers as fast as possible (or -rate); QoS 1/2 pipelined (-inflight); msgs/s and MB/s
  pubsub  -pubs publishers, -subs subscribers each subscribed to every publisher's topic; end-to-end
          latency from timestamps in the payload; loss, duplicates and reordering per publisher
  fanin   -pubs publishers on their own topics → -subs subscribers sharing $share/loadtest/… (QoS 1)
  p2p     publisher i → subscriber i on topic i, QoS 1, persistent subscribers; -churn tests offline queueing

Scenarios (-scenario NAME, -scale F):
`)
	fmt.Fprint(w, loadtest.ScenarioHelp())
	fmt.Fprint(w, `
Ctrl-C stops publishing in the case in progress, drains it and reports what ran; a second Ctrl-C
aborts. With -duration 0 publishers run until that first Ctrl-C.

Objective metrics (-assert METRIC OP VALUE,...; ops < <= > >= = !=; latency is connect time in conn mode,
publish→ack in pub mode, end to end otherwise; values: 5ms, 0.99 or 99%, 10k, 512MB):
`)
	fmt.Fprint(w, loadtest.MetricHelp())
}

// parseInts parses a comma-separated list of non-negative integers.
func parseInts(name, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-%s: %q is not a count", name, f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-%s is empty", name)
	}
	return out, nil
}

// parseArgs turns the command line into options. A scenario's flags come
// first and the mode's defaults before them, so that anything on the
// command line wins: -mode p2p implies -qos 1 unless -qos says otherwise.
func parseArgs(args []string, out io.Writer) (*flagValues, []string, error) {
	var first flagValues
	fs := newFlagSet(&first, io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(out)
			usage(fs)
			return nil, nil, err
		}
		return nil, nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, nil, usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var scArgs []string
	if first.scenario != "" {
		sc, ok := loadtest.Scenarios[first.scenario]
		if !ok {
			return nil, nil, usageError{fmt.Errorf("unknown -scenario %q; known:\n%s", first.scenario, loadtest.ScenarioHelp())}
		}
		if first.scale <= 0 {
			return nil, nil, usageError{errors.New("-scale must be positive")}
		}
		scArgs = sc.Args(first.scale)
	}
	mode := first.mode
	if !set["mode"] && len(scArgs) > 0 {
		var sv flagValues
		if err := newFlagSet(&sv, io.Discard).Parse(scArgs); err == nil {
			mode = sv.mode
		}
	}
	full := append(append(loadtest.ModeDefaults(loadtest.Mode(mode)), scArgs...), args...)
	var v flagValues
	if err := newFlagSet(&v, io.Discard).Parse(full); err != nil {
		return nil, nil, usageError{err}
	}
	o := &v.o
	o.Mode = loadtest.Mode(v.mode)
	o.QoS = v.qos
	var err error
	if o.Levels, err = parseInts("levels", v.levels); err != nil {
		return nil, nil, usageError{err}
	}
	if o.Payloads, err = parseInts("payload", v.payloads); err != nil {
		return nil, nil, usageError{err}
	}
	if v.srcIPs != "" {
		ips, err := loadtest.ParseSrcIPs(v.srcIPs)
		if err != nil {
			return nil, nil, usageError{err}
		}
		for _, ip := range ips {
			o.SrcIPs = append(o.SrcIPs, ip.String())
		}
	}
	if err := o.Validate(); err != nil {
		return nil, nil, usageError{err}
	}
	return &v, scArgs, nil
}

// run is runWith without a graceful stop: cancelling ctx aborts.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runWith(ctx, nil, args, stdout, stderr)
}

// runWith is the composition root: flags → options → Run → reports →
// objectives. Closing stop (the first Ctrl-C) ends the case in progress
// as its duration would and reports; cancelling ctx aborts.
func runWith(ctx context.Context, stop <-chan struct{}, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && (args[0] == "agent" || args[0] == "sink") {
		// A server has nothing to drain: the first Ctrl-C ends it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	if len(args) > 0 {
		switch args[0] {
		case "compare":
			return runCompare(args[1:], stdout)
		case "agent":
			return runAgent(ctx, args[1:], stdout, stderr)
		case "sink":
			return runSink(ctx, args[1:], stdout, stderr)
		case "version", "-version", "--version":
			if len(args) > 1 {
				return usageError{fmt.Errorf("version takes no arguments, got %q", args[1:])}
			}
			fmt.Fprintln(stdout, "loadtest", build())
			return nil
		}
	}
	v, scArgs, err := parseArgs(args, stdout)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		var ue usageError
		if !errors.As(err, &ue) {
			err = usageError{err}
		}
		return err
	}
	asserts, err := loadtest.ParseAssertions(v.asserts)
	if err != nil {
		return usageError{err}
	}
	cfg := loadtest.Config{Command: append([]string{"loadtest"}, args...), BrokerPID: v.brokerPID, MetricsURL: v.metricsURL,
		Stop: stop}
	if v.progress {
		cfg.Progress, cfg.ProgressTTY = stderr, isTerminal(stderr)
	}
	for _, a := range strings.Split(v.agents, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Agents = append(cfg.Agents, a)
		}
	}
	rep, runErr := loadtest.Run(ctx, v.o, cfg)
	if rep == nil {
		return runErr
	}
	if len(scArgs) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("scenario %s (%s) at scale %g runs: %s", v.scenario,
			loadtest.Scenarios[v.scenario].Source, v.scale, strings.Join(scArgs, " ")))
	}
	rep.Asserts = loadtest.Evaluate(rep, asserts)
	if runErr != nil {
		rep.Notes = append(rep.Notes, "run ended early: "+runErr.Error())
	}
	if v.jsonOut {
		err = loadtest.WriteJSON(stdout, rep)
	} else {
		err = loadtest.WriteText(stdout, rep)
	}
	if v.report != "" {
		err = errors.Join(err, writeFile(v.report, rep, loadtest.WriteMarkdown))
	}
	if v.htmlOut != "" {
		err = errors.Join(err, writeFile(v.htmlOut, rep, loadtest.WriteHTML))
	}
	if err != nil {
		return errors.Join(runErr, err)
	}
	if runErr != nil {
		return endedEarly{runErr}
	}
	if failed := rep.AssertFailures(); len(failed) > 0 {
		return assertError{failed}
	}
	return nil
}

func writeFile(path string, rep *loadtest.Report, write func(io.Writer, *loadtest.Report) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f, rep); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// runCompare is `loadtest compare [-html FILE] [-labels A,B] a.json b.json ...`:
// the runs side by side, as text on stdout and optionally as a page.
// Flags may come before or after the files.
func runCompare(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("loadtest compare", flag.ContinueOnError)
	fs.SetOutput(stdout)
	htmlOut := fs.String("html", "", "also write a self-contained HTML page with the runs side by side to `FILE.html`")
	labels := fs.String("labels", "", "column `LABELS`, comma-separated (default: the file names without .json)")
	fs.Usage = func() {
		fmt.Fprint(stdout, `loadtest compare puts runs side by side: tcp against ws, xmq against Mosquitto, before
against after. Each file is the output of loadtest -json; cases are paired in order.

Usage:
  loadtest compare [-html FILE.html] [-labels A,B] a.json b.json [more.json ...]

Flags:
`)
		fs.PrintDefaults()
	}
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil // fs.Usage has printed the help
			}
			return usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) < 2 {
		return usageError{errors.New("compare: want two or more loadtest -json reports")}
	}
	var names []string
	if *labels != "" {
		names = strings.Split(*labels, ",")
		if len(names) != len(files) {
			return usageError{fmt.Errorf("compare: %d labels for %d reports", len(names), len(files))}
		}
	}
	var runs []loadtest.Compared
	for i, f := range files {
		r, err := os.Open(f)
		if err != nil {
			return err
		}
		rep, err := loadtest.ReadReport(r)
		_ = r.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		label := strings.TrimSuffix(filepath.Base(f), ".json")
		if names != nil {
			label = strings.TrimSpace(names[i])
		}
		runs = append(runs, loadtest.Compared{Label: label, Report: rep})
	}
	err := loadtest.WriteCompareText(stdout, runs)
	if *htmlOut != "" {
		f, ferr := os.Create(*htmlOut)
		if ferr != nil {
			return errors.Join(err, ferr)
		}
		err = errors.Join(err, loadtest.WriteCompareHTML(f, runs), f.Close())
	}
	return err
}

// runAgent serves `loadtest agent -listen ADDR` until ctx ends.
func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadtest agent", flag.ContinueOnError)
	fs.SetOutput(stdout)
	listen := fs.String("listen", ":9090", "`ADDRESS` to serve the controller on")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	return loadtest.ServeAgent(ctx, *listen, newLogger(stderr), nil)
}

// runSink serves `loadtest sink -listen ADDR`: a discard broker.
func runSink(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadtest sink", flag.ContinueOnError)
	fs.SetOutput(stdout)
	listen := fs.String("listen", "127.0.0.1:1999", "TCP `ADDRESS` to accept MQTT on")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	l, err := listeners.ListenTCP(*listen)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "loadtest sink: discarding MQTT on %s\n", l.Addr())
	var s loadtest.Sink
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var prev uint64
	for {
		select {
		case <-t.C:
			n := s.Messages.Load()
			if n != prev {
				fmt.Fprintf(stderr, "loadtest sink: %d messages (%d/s)\n", n, n-prev)
				prev = n
			}
		case err := <-done:
			return err
		case <-ctx.Done():
			_ = l.Close()
			<-done
			return nil
		}
	}
}

func newLogger(w io.Writer) *zap.Logger {
	ec := zap.NewDevelopmentEncoderConfig()
	ec.EncodeTime = zapcore.TimeEncoderOfLayout("2006-01-02 15:04:05.000")
	return zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(ec), zapcore.Lock(zapcore.AddSync(w)), zap.InfoLevel))
}

// isTerminal reports whether w is a terminal (not merely a character
// device: /dev/null is one too).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
