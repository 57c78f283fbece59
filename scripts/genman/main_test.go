package main

import (
	"bytes"
	"strings"
	"testing"
)

const helpText = `demo serves things.

Usage:
  demo [flags]   serve
  demo version   print the version

Flags (each one overrides the file):
  -c FILE, -config FILE
        configuration file.
        Second line.
  -x	the flag package's one-letter form
  -H HASH     bcrypt (default) or
              sha512
  -level string
    	log level (default "info")

Environment:
  DEMO_X sets x. It is
  filled as prose.

Examples:
  demo -c a.yaml
  demo version
`

func render(t *testing.T, f func(p *page)) string {
	t.Helper()
	var b bytes.Buffer
	p := &page{w: &b}
	f(p)
	return b.String()
}

func TestHelpPage(t *testing.T) {
	out := render(t, func(p *page) { p.helpPage(helpText, true) })
	for _, want := range []string{
		".SH \"SYNOPSIS\"\n.nf\n.RS 2\ndemo [flags]   serve\n",
		".SH DESCRIPTION\ndemo serves things.\n",
		".SH \"FLAGS\"\nEach one overrides the file.\n",
		".TP\n\\fB\\-c FILE, \\-config FILE\\fR\nconfiguration file. Second line.\n",
		".TP\n\\fB\\-x\\fR\nthe flag package's one-letter form\n",
		".TP\n\\fB\\-H HASH\\fR\nbcrypt (default) or sha512\n",
		".TP\n\\fB\\-level string\\fR\nlog level (default \"info\")\n",
		".SH \"ENVIRONMENT\"\nDEMO_X sets x. It is filled as prose.\n",
		".SH \"EXAMPLES\"\n.nf\n.RS 2\ndemo \\-c a.yaml\ndemo version\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "SYNOPSIS") > strings.Index(out, "DESCRIPTION") {
		t.Errorf("DESCRIPTION comes before SYNOPSIS:\n%s", out)
	}
	// A subcommand's help as an added section: its headings are subsections.
	sub := render(t, func(p *page) { p.helpPage("demo sub does more.\n\nUsage:\n  demo sub\n", false) })
	if !strings.HasPrefix(sub, "demo sub does more.\n.PP\n.SS \"USAGE\"\n") {
		t.Errorf("added section:\n%s", sub)
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		`.not a request`: `\&.not a request`,
		`a\b`:            `a\eb`,
		`-flag and x-y`:  `\-flag and x-y`,
		`a → b`:          `a \[u2192] b`,
		`"-data ""`:      `"\-data ""`,
	} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

const yamlText = `# demo configuration.
#
#   demo -c demo.yaml

# items: the list.
items:
  - name: a

# data_dir: where data goes.
data_dir: ./data

# broker: limits.
broker:
  # max_queued: per session.
  max_queued: 1000
  # rates: per second.
  max_rate: 0
  max_bytes: 0
`

const varsText = `VARIABLE                KEY                 VALUE
XMQ_BROKER              broker              section
XMQ_BROKER_MAX_BYTES    broker.max_bytes    number
XMQ_BROKER_MAX_QUEUED   broker.max_queued   number
XMQ_BROKER_MAX_RATE     broker.max_rate     number
XMQ_DATA_DIR            data_dir            text
XMQ_ITEMS               items               list
XMQ_ITEMS_<N>_NAME      items.<N>.name      text
`

func TestYAMLPage(t *testing.T) {
	var p *page
	out := render(t, func(pg *page) {
		p = pg
		p.vars = parseVars(varsText)
		p.yamlPage(yamlText)
	})
	if p.err != nil {
		t.Fatal(p.err)
	}
	for _, want := range []string{
		".SH DESCRIPTION\ndemo configuration.\n.PP\n.nf\n.RS 2\ndemo \\-c demo.yaml\n",
		".SS \"items\"\nEnvironment: \\fBXMQ_ITEMS_<N>_NAME\\fR and the like",
		"the list.\n",
		"- name: a\n",
		".SS \"data_dir\"\n.TP\n\\fBdata_dir\\fR: \\&./data \\ \\ (\\fBXMQ_DATA_DIR\\fR)\nwhere data goes.\n",
		".SS \"broker\"\nlimits.\n",
		".TP\n\\fBbroker.max_queued\\fR: 1000 \\ \\ (\\fBXMQ_BROKER_MAX_QUEUED\\fR)\nper session.\n",
		".TP\n\\fBbroker.max_rate\\fR: 0 \\ \\ (\\fBXMQ_BROKER_MAX_RATE\\fR)\nper second.\n.PP\n.TQ\n\\fBbroker.max_bytes\\fR",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q:\n%s", want, out)
		}
	}
	// A key without a variable is an error: the page would lie.
	render(t, func(pg *page) {
		pg.vars = parseVars(strings.ReplaceAll(varsText, "XMQ_DATA_DIR", "-"))
		pg.yamlPage(yamlText)
		if pg.err == nil || !strings.Contains(pg.err.Error(), "data_dir") {
			t.Errorf("missing variable: %v", pg.err)
		}
	})
}
