package mosquitto

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/codec"
)

// Mosquitto's dynamic security plugin keeps clients, groups and roles in
// one JSON file. `xmq import -dynsec FILE -passwd P -acl A` turns it into a
// password file and an ACL file, then checks the result: it evaluates the
// plugin's rules and xmq's (the auth package, on the files written) for
// every client on topics taken from the rules, and lists each decision
// that differs. The two models differ in ways no translation removes:
//
//   - the plugin decides by the first matching rule in priority order; an
//     ACL file lets a matching deny win over any allow;
//   - the plugin has separate rules for subscribing and for receiving, and
//     for unsubscribing; xmq has read (both) and write access, and does
//     not check UNSUBSCRIBE;
//   - a plugin client may be tied to one client id; an ACL file cannot.

// DynsecFile is dynamic-security.json, as far as the importer reads it.
type DynsecFile struct {
	DefaultACLAccess map[string]bool `json:"defaultACLAccess"`
	Clients          []struct {
		Username   string      `json:"username"`
		ClientID   string      `json:"clientid"`
		Password   string      `json:"password"`
		Salt       string      `json:"salt"`
		Iterations int         `json:"iterations"`
		Disabled   bool        `json:"disabled"`
		Roles      []dynsecRef `json:"roles"`
		Groups     []dynsecRef `json:"groups"`
	} `json:"clients"`
	Groups []struct {
		Name    string      `json:"groupname"`
		Roles   []dynsecRef `json:"roles"`
		Clients []struct {
			Username string `json:"username"`
			Priority *int   `json:"priority"`
		} `json:"clients"` // the group's members: the plugin keeps membership here
	} `json:"groups"`
	Roles []struct {
		Name string      `json:"rolename"`
		ACLs []dynsecACL `json:"acls"`
	} `json:"roles"`
	AnonymousGroup string `json:"anonymousGroup"`
}

// dynsecRef names a role or a group, with its priority (-1 when absent,
// as the plugin reads it).
type dynsecRef struct {
	Role     string `json:"rolename"`
	Group    string `json:"groupname"`
	Priority *int   `json:"priority"`
}

func (r dynsecRef) prio() int {
	if r.Priority == nil {
		return -1
	}
	return *r.Priority
}

type dynsecACL struct {
	Type     string `json:"acltype"`
	Topic    string `json:"topic"`
	Priority int    `json:"priority"`
	Allow    bool   `json:"allow"`
}

// The plugin's ACL types.
const (
	DynsecPublish      = "publishClientSend"
	DynsecReceive      = "publishClientReceive"
	DynsecSubLiteral   = "subscribeLiteral"
	DynsecSubPattern   = "subscribePattern"
	DynsecUnsubLiteral = "unsubscribeLiteral"
	DynsecUnsubPattern = "unsubscribePattern"
)

// dynsecIdentity is one identity's rules as the plugin checks them: its
// roles in order, each role's ACLs in order.
type dynsecIdentity struct {
	user     string // "" for the anonymous group
	clientID string // the one client id it may use; "" for any
	roles    [][]dynsecACL
}

// dynsecModel is the plugin's decisions.
type dynsecModel struct {
	defaults   map[string]bool
	identities []dynsecIdentity
}

// maxDynsecFile bounds the file read, as import bounds its input.
const maxDynsecFile = 16 << 20

func ReadDynsec(path string) (*DynsecFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDynsecFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDynsecFile {
		return nil, fmt.Errorf("%s: over %d MiB", path, maxDynsecFile>>20)
	}
	var d DynsecFile
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: not a dynamic security file: %w", path, err)
	}
	return &d, nil
}

// model resolves roles and groups into each identity's ordered rules.
func (d *DynsecFile) model() (*dynsecModel, []string) {
	var notes []string
	roles := map[string][]dynsecACL{}
	for _, r := range d.Roles {
		acls := slices.Clone(r.ACLs)
		slices.SortStableFunc(acls, func(a, b dynsecACL) int { return b.Priority - a.Priority })
		roles[r.Name] = acls
	}
	// The plugin's order: higher priority first, then by name.
	ordered := func(refs []dynsecRef, name func(dynsecRef) string) []string {
		refs = slices.Clone(refs)
		slices.SortStableFunc(refs, func(a, b dynsecRef) int {
			if a.prio() != b.prio() {
				return b.prio() - a.prio()
			}
			return strings.Compare(name(a), name(b))
		})
		var names []string
		for _, r := range refs {
			names = append(names, name(r))
		}
		return names
	}
	groups := map[string][][]dynsecACL{}
	members := map[string][]dynsecRef{} // user → the groups it is in
	for _, g := range d.Groups {
		for _, c := range g.Clients {
			members[c.Username] = append(members[c.Username], dynsecRef{Group: g.Name, Priority: c.Priority})
		}
		for _, rn := range ordered(g.Roles, func(r dynsecRef) string { return r.Role }) {
			groups[g.Name] = append(groups[g.Name], roles[rn])
		}
	}
	m := &dynsecModel{defaults: map[string]bool{DynsecPublish: false, DynsecReceive: true, "subscribe": false, "unsubscribe": true}}
	for k, v := range d.DefaultACLAccess {
		m.defaults[k] = v
	}
	for _, c := range d.Clients {
		if c.Disabled {
			notes = append(notes, fmt.Sprintf("client %s is disabled: left out of the password file", c.Username))
			continue
		}
		id := dynsecIdentity{user: c.Username, clientID: c.ClientID}
		// The client's own roles first, then its groups' (the plugin's
		// order, whatever the priorities say across the two).
		for _, rn := range ordered(c.Roles, func(r dynsecRef) string { return r.Role }) {
			id.roles = append(id.roles, roles[rn])
		}
		for _, gn := range ordered(append(slices.Clone(c.Groups), members[c.Username]...), func(r dynsecRef) string { return r.Group }) {
			id.roles = append(id.roles, groups[gn]...)
		}
		m.identities = append(m.identities, id)
	}
	if d.AnonymousGroup != "" {
		m.identities = append(m.identities, dynsecIdentity{roles: groups[d.AnonymousGroup]})
	}
	return m, notes
}

// decide is the plugin's decision for id: the first matching ACL of the
// kinds in order, else the default.
func (m *dynsecModel) decide(id *dynsecIdentity, action, topic string) bool {
	for _, role := range id.roles {
		if action == "subscribe" {
			// Per role: the literal rules, then the patterns.
			for _, a := range role {
				if a.Type == DynsecSubLiteral && a.Topic == topic {
					return a.Allow
				}
			}
			for _, a := range role {
				if a.Type == DynsecSubPattern && filterWithin(topic, a.Topic) {
					return a.Allow
				}
			}
			continue
		}
		for _, a := range role {
			if a.Type == action && codec.Match([]byte(a.Topic), []byte(topic)) {
				return a.Allow
			}
		}
	}
	return m.defaults[action]
}

// filterWithin reports whether every topic sub matches is matched by acl:
// the plugin's test of a subscription against a subscribePattern.
func filterWithin(sub, acl string) bool {
	s, a := strings.Split(sub, "/"), strings.Split(acl, "/")
	for i, al := range a {
		if al == "#" {
			return true
		}
		if i >= len(s) {
			return false
		}
		switch {
		case s[i] == "#":
			return false
		case al == "+":
		case s[i] == "+" || s[i] != al:
			return false
		}
	}
	return len(s) == len(a)
}

// DynsecImport is the files made from a dynamic security file, and what
// they cannot say.
type DynsecImport struct {
	Passwd, ACL []byte
	Differ      []string // decisions that differ, one line each
	Notes       []string
}

// ConvertDynsec writes the files for d and checks them.
func ConvertDynsec(d *DynsecFile) (*DynsecImport, error) {
	m, notes := d.model()
	out := &DynsecImport{Notes: notes}
	var pw bytes.Buffer
	for _, c := range d.Clients {
		if c.Disabled {
			continue
		}
		if c.Password == "" {
			out.Notes = append(out.Notes, fmt.Sprintf("client %s has no password: it cannot log in with one", c.Username))
			continue
		}
		salt, err1 := base64.StdEncoding.DecodeString(c.Salt)
		hash, err2 := base64.StdEncoding.DecodeString(c.Password)
		if err := errors.Join(err1, err2); err != nil || c.Iterations < 1 || strings.ContainsAny(c.Username, ":\n") {
			out.Notes = append(out.Notes, fmt.Sprintf("client %s: its password is not one the plugin writes; left out", c.Username))
			continue
		}
		// The plugin hashes as mosquitto_passwd's $7$ does: PBKDF2 with
		// SHA-512 over the salt.
		fmt.Fprintf(&pw, "%s:$7$%d$%s$%s\n", c.Username, c.Iterations,
			base64.StdEncoding.EncodeToString(salt), base64.StdEncoding.EncodeToString(hash))
	}
	out.Passwd = pw.Bytes()

	var acl bytes.Buffer
	acl.WriteString("# Converted by xmq import from Mosquitto's dynamic security plugin.\n")
	// The anonymous group's rules come first: lines before any user line
	// are the anonymous clients'.
	ids := slices.Clone(m.identities)
	slices.SortStableFunc(ids, func(a, b dynsecIdentity) int {
		switch {
		case a.user == "" && b.user != "":
			return -1
		case a.user != "" && b.user == "":
			return 1
		}
		return strings.Compare(a.user, b.user)
	})
	anonymous := false
	for i := range ids {
		id := &ids[i]
		if id.user == "" {
			anonymous = true
		} else {
			fmt.Fprintf(&acl, "\nuser %s\n", id.user)
		}
		if id.clientID != "" {
			out.Notes = append(out.Notes, fmt.Sprintf("client %s may use client id %q only; an ACL file cannot bind a user to a client id", id.user, id.clientID))
		}
		for _, line := range aclLines(m, id) {
			acl.WriteString(line + "\n")
		}
	}
	if !anonymous {
		acl.WriteString("\n# No anonymous group: anonymous clients have no rules (set auth.allow_anonymous: false).\n")
	}
	out.ACL = acl.Bytes()
	for k, v := range m.defaults {
		if k == "unsubscribe" && !v {
			out.Notes = append(out.Notes, "defaultACLAccess.unsubscribe is false: xmq does not check UNSUBSCRIBE")
		}
	}
	for _, r := range d.Roles {
		for _, a := range r.ACLs {
			if (a.Type == DynsecUnsubLiteral || a.Type == DynsecUnsubPattern) && !a.Allow {
				out.Notes = append(out.Notes, fmt.Sprintf("role %s denies unsubscribing from %s: xmq does not check UNSUBSCRIBE", r.Name, a.Topic))
			}
			if strings.Contains(a.Topic, "%") {
				out.Notes = append(out.Notes, fmt.Sprintf("role %s: %s is taken literally (the plugin has no %%c/%%u patterns)", r.Name, a.Topic))
			}
		}
	}
	var err error
	out.Differ, err = verifyDynsec(m, ids, out.ACL)
	return out, err
}

// aclLines are the ACL file lines of one identity: the allows no earlier
// deny hides, the denies no earlier allow hides, and the defaults as rules
// on # (a deny still wins over them, as a deny of the plugin wins over its
// default).
func aclLines(m *dynsecModel, id *dynsecIdentity) []string {
	var lines []string
	seen := map[string]bool{}
	add := func(l string) {
		if !seen[l] {
			seen[l] = true
			lines = append(lines, l)
		}
	}
	var earlier []dynsecACL
	hidden := func(a dynsecACL) bool {
		for _, e := range earlier {
			if e.Allow != a.Allow && sameKind(e.Type, a.Type) && filterWithin(a.Topic, e.Topic) {
				return true
			}
		}
		return false
	}
	for _, role := range id.roles {
		for _, a := range role {
			if hidden(a) {
				earlier = append(earlier, a)
				continue
			}
			earlier = append(earlier, a)
			switch {
			case a.Type == DynsecUnsubLiteral || a.Type == DynsecUnsubPattern:
			case !a.Allow:
				add("topic deny " + a.Topic)
			case a.Type == DynsecPublish:
				add("topic write " + a.Topic)
			case a.Type == DynsecSubLiteral || a.Type == DynsecSubPattern:
				add("topic read " + a.Topic)
			}
		}
	}
	if m.defaults[DynsecPublish] {
		add("topic write #")
	}
	if m.defaults["subscribe"] {
		add("topic read #")
	}
	return lines
}

// sameKind reports whether two ACL types decide the same access.
func sameKind(a, b string) bool {
	kind := func(t string) string {
		switch t {
		case DynsecSubLiteral, DynsecSubPattern:
			return "subscribe"
		case DynsecUnsubLiteral, DynsecUnsubPattern:
			return "unsubscribe"
		}
		return t
	}
	return kind(a) == kind(b)
}

// verifyDynsec loads the ACL file into xmq's auth and compares its
// decisions with the plugin's, for every identity, on the rules' topics
// (each as written, and with its wildcards filled in) and a few others.
func verifyDynsec(m *dynsecModel, ids []dynsecIdentity, acl []byte) ([]string, error) {
	dir, err := os.MkdirTemp("", "xmq-dynsec-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := dir + string(os.PathSeparator) + "acl"
	if err := os.WriteFile(file, acl, 0o600); err != nil {
		return nil, err
	}
	a, err := auth.New(auth.Options{ACLFile: file, ReloadInterval: -1})
	if err != nil {
		return nil, fmt.Errorf("the ACL file written does not load: %w", err)
	}
	defer a.Close()
	var topics, filters []string
	seenT, seenF := map[string]bool{}, map[string]bool{}
	addT := func(t string) {
		if !seenT[t] && codec.ValidTopicName([]byte(t)) == nil {
			seenT[t] = true
			topics = append(topics, t)
		}
	}
	addF := func(f string) {
		if !seenF[f] && codec.ValidFilter([]byte(f)) == nil {
			seenF[f] = true
			filters = append(filters, f)
		}
	}
	for _, id := range ids {
		for _, role := range id.roles {
			for _, acl := range role {
				addF(acl.Topic)
				concrete := strings.NewReplacer("+", "x", "#", "x/y").Replace(acl.Topic)
				addT(concrete)
				addF(concrete)
			}
		}
	}
	for _, t := range []string{"other", "other/x"} {
		addT(t)
		addF(t)
	}
	addF("#")
	var differ []string
	who := func(id *dynsecIdentity) string {
		if id.user == "" {
			return "anonymous clients"
		}
		return "user " + id.user
	}
	verdict := map[bool]string{true: "Mosquitto allows, xmq refuses", false: "Mosquitto refuses, xmq allows"}
	for i := range ids {
		id := &ids[i]
		cid := id.clientID
		if cid == "" {
			cid = "import-check"
		}
		for _, t := range topics {
			if mosq := m.decide(id, DynsecPublish, t); mosq != a.CanPublish(cid, id.user, t) {
				differ = append(differ, fmt.Sprintf("%s, publish to %s: %s", who(id), t, verdict[mosq]))
			}
		}
		// What reaches a client subscribed to every filter of the rules:
		// xmq grants a filter when a topic of it may be read and checks
		// each message, the plugin only a filter within a pattern, so the
		// SUBACKs may differ where the messages do not.
		for _, t := range topics {
			mosq, xmq := false, false
			for _, f := range filters {
				if !codec.Match([]byte(f), []byte(t)) {
					continue
				}
				mosq = mosq || m.decide(id, "subscribe", f) && m.decide(id, DynsecReceive, t)
				xmq = xmq || a.CanSubscribe(cid, id.user, f) && a.CanRead(cid, id.user, t)
			}
			if mosq != xmq {
				differ = append(differ, fmt.Sprintf("%s, receive from %s: %s", who(id), t, verdict[mosq]))
			}
		}
	}
	return differ, nil
}
