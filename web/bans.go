package web

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// banAPI serves /api/v1/banned: the runtime banned list.
type banAPI struct {
	bans BanList // nil: 501
	log  *zap.Logger
}

var errNoBans = errorf(http.StatusNotImplemented, "not_implemented",
	"the banned list needs the auth module, which this broker was built without")

// banKinds are the kinds an operator sets; flapBanKinds are set by the
// broker's flap detection (a client id with one user name or address) and
// listed and lifted like the others.
var (
	banKinds     = []string{"client_id", "username", "ip"}
	flapBanKinds = []string{"client_id+username", "client_id+ip"}
)

func (a banAPI) listBans(w http.ResponseWriter, r *http.Request, _ principal, _ string) error {
	if a.bans == nil {
		return errNoBans
	}
	pg, err := parsePage(r)
	if err != nil {
		return err
	}
	bans := a.bans.Bans()
	slices.SortFunc(bans, func(a, b Ban) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	writeJSON(w, http.StatusOK, pageOf(bans, pg))
	return nil
}

func (a banAPI) addBan(w http.ResponseWriter, r *http.Request, p principal, _ string) error {
	if a.bans == nil {
		return errNoBans
	}
	var body struct {
		Kind     string    `json:"kind"`
		Value    string    `json:"value"`
		Reason   string    `json:"reason"`
		Duration string    `json:"duration"` // e.g. "1h"; "" with no until: until removed
		Until    time.Time `json:"until"`
	}
	if err := decodeBody(a.log, w, r, maxBody, &body); err != nil {
		return err
	}
	noteAudit(r, func(n *auditNote) { n.target = body.Kind + "/" + body.Value })
	if !slices.Contains(banKinds, body.Kind) {
		return badRequest(fmt.Sprintf("kind %q: want one of %s", body.Kind, strings.Join(banKinds, ", ")))
	}
	if body.Value == "" {
		return badRequest("value is empty")
	}
	if body.Kind == "ip" && net.ParseIP(body.Value) == nil {
		if _, _, err := net.ParseCIDR(body.Value); err != nil {
			return badRequest(fmt.Sprintf("ip %q: want an IP address or a CIDR prefix", body.Value))
		}
	}
	until := body.Until
	if body.Duration != "" {
		if !until.IsZero() {
			return badRequest("give duration or until, not both")
		}
		d, err := time.ParseDuration(body.Duration)
		if err != nil || d <= 0 {
			return badRequest(fmt.Sprintf("duration %q: want a positive duration such as 30m or 24h", body.Duration))
		}
		until = time.Now().Add(d)
	}
	if err := a.bans.Ban(body.Kind, body.Value, body.Reason, until); err != nil {
		return badRequest(err.Error())
	}
	a.log.Info("banned", zap.String("kind", body.Kind), zap.String("value", body.Value), zap.String("by", p.User))
	writeJSON(w, http.StatusCreated, Ban{Kind: body.Kind, Value: body.Value, Reason: body.Reason, Until: until, Created: time.Now()})
	return nil
}

// removeBan serves DELETE /banned/{kind}/{value}.
func (a banAPI) removeBan(w http.ResponseWriter, r *http.Request, p principal, rest string) error {
	if a.bans == nil {
		return errNoBans
	}
	kind, value, ok := strings.Cut(rest, "/")
	if !ok || value == "" || !slices.Contains(banKinds, kind) && !slices.Contains(flapBanKinds, kind) {
		return notFound("DELETE " + apiPrefix + "/banned/{kind}/{value}, kind one of " +
			strings.Join(slices.Concat(banKinds, flapBanKinds), ", "))
	}
	removed, err := a.bans.Unban(kind, value)
	if err != nil {
		return badRequest(err.Error())
	}
	if !removed {
		return notFound(fmt.Sprintf("%s %q is not banned", kind, value))
	}
	a.log.Info("unbanned", zap.String("kind", kind), zap.String("value", value), zap.String("by", p.User))
	writeJSON(w, http.StatusOK, map[string]any{"kind": kind, "value": value, "removed": true})
	return nil
}
