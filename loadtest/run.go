package loadtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/xmq-io/xmq/codec"
	"github.com/xmq-io/xmq/listeners"
)

// Config is what Run needs besides the Options: where to print progress,
// the agents to split the load over, and where to watch the broker.
type Config struct {
	Log         *zap.Logger
	Progress    io.Writer // the live line, once a second; nil for none
	ProgressTTY bool      // rewrite the line in place instead of one line per second
	Agents      []string  // host:port of `loadtest agent` processes; empty = run here
	BrokerPID   int       // sample this local process's CPU and RSS
	MetricsURL  string    // or scrape the broker's Prometheus metrics
	Command     []string  // the command line, for the reports
	Client      *http.Client
	// Stop, when closed (the first Ctrl-C), ends the publishing phase of
	// the case in progress as its duration would, drains it and ends the
	// run after it. Options.Duration 0 publishes until then.
	Stop <-chan struct{}
}

// Report is a whole run: environment, settings and one result per case.
type Report struct {
	Tool      string         `json:"tool"`
	Started   time.Time      `json:"started"`
	Finished  time.Time      `json:"finished"`
	Command   []string       `json:"command,omitempty"`
	Env       Env            `json:"env"`
	URL       string         `json:"url"`
	Transport string         `json:"transport"`
	MQTT      string         `json:"mqtt"`
	Options   Options        `json:"options"`
	Agents    []string       `json:"agents,omitempty"`
	AgentEnvs []Env          `json:"agent_envs,omitempty"`
	Cases     []*CaseResult  `json:"cases"`
	Asserts   []AssertResult `json:"asserts,omitempty"`
	Notes     []string       `json:"notes,omitempty"`
}

// caseSpec is one case of a run.
type caseSpec struct {
	name    string
	level   int
	payload int
}

func cases(o *Options) []caseSpec {
	var cs []caseSpec
	if o.Mode == ModeConn {
		for _, l := range o.Levels {
			cs = append(cs, caseSpec{name: fmt.Sprintf("%d connections", l), level: l})
		}
		return cs
	}
	for _, p := range o.Payloads {
		cs = append(cs, caseSpec{name: fmt.Sprintf("%d B", p), payload: p})
	}
	return cs
}

// Run runs every case of o, here or on the agents, and returns the report.
// On an error it returns the report of the cases that finished.
func Run(ctx context.Context, o Options, cfg Config) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Duration == 0 && o.Mode != ModeConn && len(cfg.Agents) > 0 {
		return nil, errors.New("loadtest: -duration 0 runs until Ctrl-C, which agents do not see: give a duration")
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	us, t, _ := o.URLs()
	u := strings.Join(us, ",")
	shown := o
	if shown.Pass != "" {
		shown.Pass = "<redacted>"
	}
	rep := &Report{Tool: "xmq loadtest", Started: time.Now(), Command: cfg.Command, Env: CollectEnv(), URL: u,
		Transport: t, MQTT: o.MQTT, Options: shown, Agents: cfg.Agents}
	rep.Notes = notes(&o, &cfg)
	token := o.IDPrefix
	if token == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		token = "lt" + hex.EncodeToString(b[:])
	}
	var probe brokerProbe
	source := ""
	switch {
	case cfg.BrokerPID > 0:
		probe, source = pidProbe(cfg.BrokerPID), fmt.Sprintf("/proc/%d", cfg.BrokerPID)
	case cfg.MetricsURL != "":
		probe, source = metricsProbe(cfg.MetricsURL, cfg.Client), cfg.MetricsURL
	}
	var agents []*agentClient
	for _, a := range cfg.Agents {
		agents = append(agents, newAgentClient(a, cfg.Client))
	}
	if len(agents) > 0 {
		envs, err := agentEnvs(ctx, agents)
		if err != nil {
			return nil, err
		}
		rep.AgentEnvs = envs
	}
	defer func() {
		rep.Finished = time.Now()
		rep.Notes = append(rep.Notes, deliveryNotes(&o, rep.Cases)...)
	}()
	for _, cs := range cases(&o) {
		res, err := runCase(ctx, &o, cs, &cfg, token, agents, source, probe)
		if res != nil {
			rep.Cases = append(rep.Cases, res)
		}
		if err != nil {
			return rep, fmt.Errorf("case %s: %w", cs.name, err)
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		if stopped(cfg.Stop) {
			if n := len(cases(&o)) - len(rep.Cases); n > 0 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("stopped (Ctrl-C) after case %s: %d more not run", cs.name, n))
			}
			break
		}
	}
	return rep, nil
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// notes are caveats a reader of the report needs.
func notes(o *Options, cfg *Config) []string {
	var n []string
	if o.Mode != ModeConn {
		for _, p := range o.Payloads {
			if p < headerLen && o.Mode != ModePub {
				n = append(n, fmt.Sprintf("payload %d B is shorter than the %d-byte header: those messages are counted, not timed or sequenced", p, headerLen))
			}
		}
	}
	if u, _, err := o.URL(); err == nil && len(cfg.Agents) == 0 && isLoopback(u) {
		n = append(n, "broker and generator share this machine: their CPU use competes (see gen CPU and broker CPU)")
	}
	if len(cfg.Agents) > 1 && o.Mode != ModeConn && o.Mode != ModePub {
		n = append(n, "latency across machines is only as good as their clock synchronisation")
	}
	if o.Mode == ModePubSub && o.QoS == 0 {
		n = append(n, "QoS 0: a broker may drop messages to subscribers that lag; loss is then expected, not a fault")
	}
	return n
}

// deliveryNotes are what a run's protocol version lets it see of refused
// publishes. MQTT 3.1.1 has no reason codes: a broker that refuses a QoS
// 1/2 publish (ACL, quota, packet size) still acknowledges it, so only
// subscribers can tell; the notes say so and compare their deliveries
// with what was acknowledged.
func deliveryNotes(o *Options, cases []*CaseResult) []string {
	if v, _ := o.Version(); o.Mode == ModeConn || o.QoS == 0 || v == codec.V5 {
		return nil
	}
	n := fmt.Sprintf("MQTT %s has no reason codes: a broker that refuses a QoS %d publish (ACL, quota, packet size) "+
		"acknowledges it all the same, so the acked count cannot show a refusal; -mqtt 5 reports each refusal by its reason code", o.MQTT, o.QoS)
	if !o.hasSubscribers() {
		n += "; with subscribers (-mode pubsub, fanin or p2p) deliveries are checked against publishes"
	}
	notes := []string{n}
	if !o.hasSubscribers() {
		return notes
	}
	for _, c := range cases {
		switch {
		case c.Expected == 0:
		case c.LostMessages > 0 && c.Acked >= c.Published:
			notes = append(notes, fmt.Sprintf("%s: %s of %s expected deliveries never arrived although the broker acknowledged "+
				"every publish: it may have refused them silently (ACL, queue limits); rerun with -mqtt 5 to see reason codes",
				c.Name, commas(c.LostMessages), commas(c.Expected)))
		case c.LostMessages > 0:
			notes = append(notes, fmt.Sprintf("%s: %s of %s expected deliveries never arrived; %s publishes were not acknowledged",
				c.Name, commas(c.LostMessages), commas(c.Expected), commas(c.Published-min(c.Acked, c.Published))))
		default:
			notes = append(notes, fmt.Sprintf("%s: every one of the %s expected deliveries arrived: no publish was refused",
				c.Name, commas(c.Expected)))
		}
	}
	return notes
}

// isLoopback reports whether a URL's host is a loopback address or localhost.
func isLoopback(rawURL string) bool {
	_, addr, _, err := listeners.ParseURL(rawURL)
	if err != nil {
		return false
	}
	h, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback()
	}
	return h == "localhost"
}

// split makes the jobs of one case for k workers.
func split(o *Options, cs caseSpec, k int, token string) []Job {
	jobs := make([]Job, k)
	notBefore := time.Now().Add(-time.Second).UnixNano()
	for a := range jobs {
		oa := *o
		if k > 1 {
			oa.DialConcurrency = max(1, o.DialConcurrency/k)
			oa.ConnRate = o.ConnRate / float64(k)
		}
		j := Job{Options: oa, Case: cs.name, Payload: cs.payload, Token: token, NotBefore: notBefore, Agent: a,
			Alone: k == 1}
		if o.Mode == ModeConn {
			j.First = cs.level * a / k
			j.Target = cs.level*(a+1)/k - j.First
		} else {
			j.PubLo, j.PubHi = o.Pubs*a/k, o.Pubs*(a+1)/k
			s := o.subCount()
			j.SubLo, j.SubHi = s*a/k, s*(a+1)/k
		}
		jobs[a] = j
	}
	return jobs
}

// runCase runs one case: prepare every worker, start them together, merge.
func runCase(ctx context.Context, o *Options, cs caseSpec, cfg *Config, token string, agents []*agentClient,
	source string, probe brokerProbe) (*CaseResult, error) {
	k := max(len(agents), 1)
	jobs := split(o, cs, k, token)
	var progress func(context.Context) Progress
	var start func(context.Context) ([]*CaseResult, error)
	if len(agents) == 0 {
		w, err := Prepare(ctx, jobs[0], cfg.Log)
		if err != nil {
			return nil, err
		}
		progress = func(context.Context) Progress { return w.Progress() }
		start = func(ctx context.Context) ([]*CaseResult, error) {
			done := make(chan struct{})
			defer close(done)
			go func() {
				select {
				case <-cfg.Stop: // nil: never
					w.Stop()
				case <-done:
				}
			}()
			r, err := w.Start(ctx)
			return []*CaseResult{r}, err
		}
	} else {
		ids, err := prepareAgents(ctx, agents, jobs)
		if err != nil {
			return nil, err
		}
		progress = func(ctx context.Context) Progress { return agentProgress(ctx, agents, ids) }
		start = func(ctx context.Context) ([]*CaseResult, error) { return startAgents(ctx, agents, ids) }
	}
	sampler := startBrokerSampler(ctx, source, probe)
	began := time.Now()
	machine0 := machineCPU()
	stopLine := printProgress(ctx, cfg, o, cs, progress)
	results, err := start(ctx)
	stopLine()
	machine := machineCPU().sub(machine0)
	broker := sampler.stop(context.WithoutCancel(ctx))
	if len(results) == 0 {
		return nil, err
	}
	merged := &CaseResult{}
	for i, r := range results {
		if r == nil {
			continue
		}
		if i == 0 || merged.Name == "" {
			*merged = CaseResult{Name: r.Name, Mode: r.Mode, Payload: r.Payload, QoS: r.QoS, Pubs: r.Pubs,
				Subs: r.Subs, Rate: r.Rate}
		}
		merged.Merge(r)
	}
	if o.Mode == ModeConn {
		merged.Target = cs.level
	}
	merged.Broker = broker
	broker.attach(merged.Series, began)
	merged.Finish()
	if len(agents) == 0 && machine.total > 0 {
		// What this machine's CPUs did besides the generator (and the
		// broker, when sampled): other work skews a loopback figure.
		busy := 100 * machine.busy / machine.total * float64(machine.cpus)
		other := busy - merged.Generator.CPUPercent
		if broker != nil && broker.Samples > 1 {
			other -= broker.CPUAvg
		}
		merged.Machine = &MachineStats{BusyPct: busy, OtherPct: max(other, 0)}
	}
	return merged, err
}

// printProgress prints the live line once a second until stopped.
func printProgress(ctx context.Context, cfg *Config, o *Options, cs caseSpec,
	progress func(context.Context) Progress) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var prev Progress
		began := time.Now()
		for {
			select {
			case <-t.C:
			case <-done:
				if cfg.ProgressTTY {
					fmt.Fprint(cfg.Progress, "\r\033[K")
				}
				return
			case <-ctx.Done():
				return
			}
			pctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond)
			p := progress(pctx)
			cancel()
			line := progressLine(o, cs, p, prev, time.Since(began))
			prev = p
			if cfg.ProgressTTY {
				fmt.Fprint(cfg.Progress, "\r\033[K"+line)
			} else {
				fmt.Fprintln(cfg.Progress, line)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func progressLine(o *Options, cs caseSpec, p, prev Progress, since time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%4.0fs] %s %s %-9s conns %s", since.Seconds(), o.Mode, cs.name, p.Phase, commas(uint64(max(p.Connected, 0))))
	if o.Mode == ModeConn {
		fmt.Fprintf(&b, " (%+d/s)  failed %s", p.Connected-prev.Connected, commas(uint64(p.Failed)))
	} else {
		fmt.Fprintf(&b, "  sent %s (%s/s)", commas(p.Published), commas(p.Published-min(prev.Published, p.Published)))
		if o.hasSubscribers() {
			fmt.Fprintf(&b, "  recv %s (%s/s)", commas(p.Delivered), commas(p.Delivered-min(prev.Delivered, p.Delivered)))
		}
	}
	fmt.Fprintf(&b, "  errors %s", commas(p.Errors))
	if o.Duration == 0 && o.Mode != ModeConn && p.Phase == "running" {
		b.WriteString("  (Ctrl-C: stop, drain and report)")
	}
	return b.String()
}

// errAgent wraps failures reported by an agent.
var errAgent = errors.New("loadtest: agent")

// prepareAgents sends each agent its job; if any fails, the others are closed.
func prepareAgents(ctx context.Context, agents []*agentClient, jobs []Job) ([]string, error) {
	ids := make([]string, len(agents))
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() { ids[i], errs[i] = a.prepare(ctx, jobs[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, a := range agents {
			if ids[i] != "" {
				a.close(context.WithoutCancel(ctx), ids[i])
			}
		}
		return nil, err
	}
	return ids, nil
}

// startAgents starts every agent at once and collects their results.
func startAgents(ctx context.Context, agents []*agentClient, ids []string) ([]*CaseResult, error) {
	res := make([]*CaseResult, len(agents))
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() { res[i], errs[i] = a.start(ctx, ids[i]) })
	}
	wg.Wait()
	return res, errors.Join(errs...)
}

func agentProgress(ctx context.Context, agents []*agentClient, ids []string) Progress {
	var total Progress
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() {
			p, err := a.progress(ctx, ids[i])
			if err == nil {
				mu.Lock()
				total.add(p)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return total
}

func agentEnvs(ctx context.Context, agents []*agentClient) ([]Env, error) {
	envs := make([]Env, len(agents))
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() { envs[i], errs[i] = a.env(ctx) })
	}
	wg.Wait()
	return envs, errors.Join(errs...)
}
