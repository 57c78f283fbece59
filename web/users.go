package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/xmq-io/xmq/internal/atomicfile"
)

// Dashboard users (EMQX's "users with roles" for one node): besides the
// configured admin (Options.AdminUser), admins create users with a role,
// each with a bcrypt-hashed password (HashPassword, as the admin's), kept
// in Options.UsersFile. The configured admin is a built-in user: listed
// with the others, never deleted nor demoted, its password where it was
// (Options.AdminPasswordFile), so an existing install logs in as before.
//
// A user's sessions and bearer tokens end when the user is deleted, its
// role changes or its password changes: the authenticator keeps a
// generation per user name that every grant records (auth.go).

// UsersFile is where the dashboard's users are kept, relative to the data
// directory.
const UsersFile = "web/users.json"

// Limits of the users' fields. bcrypt reads at most 72 bytes of a
// password; a longer one is refused rather than cut.
const (
	minPasswordLen = 8
	maxPasswordLen = 72
	maxDescription = 256
	maxUsers       = 1000
)

// userName is what a user may be called: no ":" (API keys' principals
// are "key:NAME"), no spaces or slashes (the name is a path segment).
var userName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$`)

// reservedUser names principals that are not users.
const reservedUser = "anonymous"

// user is one dashboard user as the users file keeps it; Hash, its bcrypt
// hash, goes to the file only, never to the API (userJSON).
type user struct {
	Name        string    `json:"name"`
	Role        Role      `json:"role"`
	Description string    `json:"description,omitempty"`
	Hash        string    `json:"password_hash"`
	Created     time.Time `json:"created_at,omitzero"`
	Updated     time.Time `json:"updated_at,omitzero"`
	builtin     bool      // the configured admin: not in the file
}

// userJSON is a user as the API shows it: never its hash.
type userJSON struct {
	Name        string    `json:"name"`
	Role        Role      `json:"role"`
	Description string    `json:"description"`
	Builtin     bool      `json:"builtin"` // the configured admin (web.admin_user)
	Created     time.Time `json:"created_at,omitzero"`
	Updated     time.Time `json:"updated_at,omitzero"`
}

func (u *user) view() userJSON {
	return userJSON{Name: u.Name, Role: u.Role, Description: u.Description, Builtin: u.builtin, Created: u.Created, Updated: u.Updated}
}

// usersFileJSON is the users file's document.
type usersFileJSON struct {
	Version int     `json:"version"`
	Users   []*user `json:"users"`
}

// Errors of the users store, answered by the API with their status.
var (
	errUserExists   = errorf(http.StatusConflict, "exists", "a user of that name exists")
	errUserNotFound = notFound("no such user")
	errLastAdmin    = errorf(http.StatusConflict, "last_admin", "the last admin cannot be deleted or demoted: make another user admin first")
	errBuiltinUser  = errorf(http.StatusConflict, "builtin",
		"the configured admin user (web.admin_user) cannot be deleted, demoted or given a description; its password can be changed unless XMQ_ADMIN_PASSWORD or web.admin_password_hash sets it")
	errFixedPassword = errorf(http.StatusConflict, "password_fixed",
		"the admin's password is set by XMQ_ADMIN_PASSWORD or web.admin_password_hash, which win at every start: change it there")
)

// userStore holds the users. Its mutex guards users; a change is written
// to the file under it before it takes effect, so the file and memory
// agree and two changes never race to the file.
type userStore struct {
	file      string // "": in memory only
	adminFile string // where the built-in admin's new hash goes; "": memory
	adminFix  bool   // the built-in admin's password is configured
	cost      int    // bcrypt cost of new hashes

	mu    sync.Mutex
	users map[string]*user
}

func newUserStore(o *Options) *userStore {
	us := &userStore{file: o.UsersFile, adminFile: o.AdminPasswordFile, adminFix: o.AdminPasswordFixed,
		cost: bcrypt.DefaultCost, users: map[string]*user{}}
	if len(o.AdminPasswordHash) > 0 {
		us.users[o.AdminUser] = &user{Name: o.AdminUser, Role: RoleAdmin, Hash: string(o.AdminPasswordHash), builtin: true}
	}
	return us
}

// load reads the users file; a missing file is no users yet.
func (us *userStore) load() error {
	if us.file == "" {
		return nil
	}
	data, err := os.ReadFile(us.file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("web: users: %w", err)
	}
	var doc usersFileJSON
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("web: users file %s: %w", us.file, err)
	}
	us.mu.Lock()
	defer us.mu.Unlock()
	for _, u := range doc.Users {
		if err := u.check(); err != nil {
			return fmt.Errorf("web: users file %s: %w", us.file, err)
		}
		if _, err := bcryptCost([]byte(u.Hash)); err != nil {
			return fmt.Errorf("web: users file %s: user %q: %w", us.file, u.Name, err)
		}
		if old := us.users[u.Name]; old != nil {
			// The configured admin's name was given to a file's user
			// after the file was written: the configuration wins.
			continue
		}
		us.users[u.Name] = u
	}
	return nil
}

// check validates a user's name, role and description.
func (u *user) check() error {
	if !userName.MatchString(u.Name) || u.Name == reservedUser {
		return badRequest(fmt.Sprintf("user name %q: want 1 to 64 letters, digits and . _ @ - (starting with a letter or digit), not %q", u.Name, reservedUser))
	}
	if u.Role != RoleViewer && u.Role != RoleAdmin {
		return badRequest(fmt.Sprintf("role %q: want viewer or admin", u.Role))
	}
	if len(u.Description) > maxDescription || !utf8.ValidString(u.Description) {
		return badRequest(fmt.Sprintf("description: want at most %d bytes of UTF-8", maxDescription))
	}
	return nil
}

// checkPasswordRules refuses passwords too short to resist guessing or
// too long for bcrypt.
func checkPasswordRules(pw string) error {
	if len(pw) < minPasswordLen || len(pw) > maxPasswordLen {
		return badRequest(fmt.Sprintf("password: want %d to %d bytes", minPasswordLen, maxPasswordLen))
	}
	return nil
}

// hash hashes a new password at the store's cost.
func (us *userStore) hash(pw string) (string, error) {
	h, err := hashPassword(pw, us.cost)
	return string(h), err
}

// credentials returns the hash and role of name.
func (us *userStore) credentials(name string) (hash []byte, role Role, ok bool) {
	us.mu.Lock()
	defer us.mu.Unlock()
	u := us.users[name]
	if u == nil {
		return nil, "", false
	}
	return []byte(u.Hash), u.Role, true
}

// anyHash returns some user's hash, to spend a bcrypt comparison on a name
// that does not exist, so the time taken does not tell.
func (us *userStore) anyHash() []byte {
	us.mu.Lock()
	defer us.mu.Unlock()
	for _, u := range us.users {
		return []byte(u.Hash)
	}
	return nil
}

func (us *userStore) get(name string) (userJSON, bool) {
	us.mu.Lock()
	defer us.mu.Unlock()
	u := us.users[name]
	if u == nil {
		return userJSON{}, false
	}
	return u.view(), true
}

func (us *userStore) list() []userJSON {
	us.mu.Lock()
	defer us.mu.Unlock()
	out := make([]userJSON, 0, len(us.users))
	for _, u := range us.users {
		out = append(out, u.view())
	}
	slices.SortFunc(out, func(a, b userJSON) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// create adds u (its hash set).
func (us *userStore) create(u *user) error {
	us.mu.Lock()
	defer us.mu.Unlock()
	if us.users[u.Name] != nil {
		return errUserExists
	}
	if len(us.users) >= maxUsers {
		return errorf(http.StatusConflict, "too_many_users", fmt.Sprintf("at most %d users", maxUsers))
	}
	return us.commit(u.Name, u)
}

// update applies change to a copy of name's user and keeps it when the
// store still has an admin. It reports whether the role or the password
// changed, which ends the user's sessions.
func (us *userStore) update(name string, change func(*user) error) (_ userJSON, revoke bool, err error) {
	us.mu.Lock()
	defer us.mu.Unlock()
	old := us.users[name]
	if old == nil {
		return userJSON{}, false, errUserNotFound
	}
	u := *old
	if err := change(&u); err != nil {
		return userJSON{}, false, err
	}
	if err := u.check(); err != nil {
		return userJSON{}, false, err
	}
	if u.builtin && (u.Role != RoleAdmin || u.Description != old.Description) {
		// Only its hash is kept (in its own file), so nothing else of it
		// may change.
		return userJSON{}, false, errBuiltinUser
	}
	if u.builtin && u.Hash != old.Hash && us.adminFix {
		return userJSON{}, false, errFixedPassword
	}
	if old.Role == RoleAdmin && u.Role != RoleAdmin && us.admins() == 1 {
		return userJSON{}, false, errLastAdmin
	}
	u.Updated = time.Now().UTC()
	if err := us.commit(name, &u); err != nil {
		return userJSON{}, false, err
	}
	return u.view(), u.Role != old.Role || u.Hash != old.Hash, nil
}

// remove deletes name's user.
func (us *userStore) remove(name string) error {
	us.mu.Lock()
	defer us.mu.Unlock()
	u := us.users[name]
	switch {
	case u == nil:
		return errUserNotFound
	case u.builtin:
		return errBuiltinUser
	case u.Role == RoleAdmin && us.admins() == 1:
		return errLastAdmin
	}
	return us.commit(name, nil)
}

// admins counts the users with the admin role. Called with mu held.
func (us *userStore) admins() int {
	n := 0
	for _, u := range us.users {
		if u.Role == RoleAdmin {
			n++
		}
	}
	return n
}

// commit sets name's user to u (nil: deleted) and writes the file, or
// the built-in admin's hash file; on a write error nothing changes.
// Called with mu held.
func (us *userStore) commit(name string, u *user) error {
	old, had := us.users[name]
	if u == nil {
		delete(us.users, name)
	} else {
		us.users[name] = u
	}
	var err error
	if u != nil && u.builtin {
		if us.adminFile != "" && u.Hash != old.Hash {
			err = writeFileAtomic(us.adminFile, []byte(u.Hash+"\n"), 0o600)
		}
	} else {
		err = us.save()
	}
	if err != nil {
		if had {
			us.users[name] = old
		} else {
			delete(us.users, name)
		}
		return fmt.Errorf("web: users: %w", err)
	}
	return nil
}

// save writes the users, the built-in admin left out. Called with mu held.
func (us *userStore) save() error {
	if us.file == "" {
		return nil
	}
	doc := usersFileJSON{Version: 1, Users: []*user{}}
	for _, u := range us.users {
		if !u.builtin {
			doc.Users = append(doc.Users, u)
		}
	}
	slices.SortFunc(doc.Users, func(a, b *user) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(us.file, append(data, '\n'), 0o600)
}

// writeFileAtomic makes path's directory (0700: it holds secrets) and
// writes path atomically.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data, mode)
}

// ---- the users API ----

// listUsers serves GET /users: every user, by name.
func (s *Server) listUsers(w http.ResponseWriter, _ *http.Request, _ principal, _ string) error {
	writeJSON(w, http.StatusOK, map[string]any{"items": s.auth.users.list()})
	return nil
}

// getUser serves GET /users/{name}.
func (s *Server) getUser(w http.ResponseWriter, _ *http.Request, _ principal, name string) error {
	u, ok := s.auth.users.get(name)
	if !ok {
		return errUserNotFound
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

// createUser serves POST /users.
func (s *Server) createUser(w http.ResponseWriter, r *http.Request, p principal, _ string) error {
	var body struct {
		Name        string `json:"name"`
		Role        Role   `json:"role"`
		Password    string `json:"password"`
		Description string `json:"description"`
	}
	if err := decodeBody(s.log, w, r, maxLoginBody, &body); err != nil {
		return err
	}
	noteAudit(r, func(n *auditNote) { n.target = body.Name })
	now := time.Now().UTC()
	u := &user{Name: body.Name, Role: body.Role, Description: body.Description, Created: now, Updated: now}
	if err := u.check(); err != nil {
		return err
	}
	if err := checkPasswordRules(body.Password); err != nil {
		return err
	}
	if _, exists := s.auth.users.get(u.Name); exists {
		return errUserExists // before spending bcrypt on it
	}
	var err error
	if u.Hash, err = s.auth.users.hash(body.Password); err != nil {
		return err
	}
	if err := s.auth.users.create(u); err != nil {
		return err
	}
	// A name used before (deleted, then created again) starts with no
	// session of its former self: those ended at the deletion.
	s.log.Info("dashboard user created", zap.String("user", u.Name), zap.String("role", string(u.Role)), zap.String("by", p.User))
	writeJSON(w, http.StatusCreated, u.view())
	return nil
}

// updateUser serves PUT /users/{name}: the fields sent change, the others
// stay. A new role or password ends the user's sessions and tokens.
func (s *Server) updateUser(w http.ResponseWriter, r *http.Request, p principal, name string) error {
	var body struct {
		Role        *Role   `json:"role"`
		Password    *string `json:"password"`
		Description *string `json:"description"`
	}
	if err := decodeBody(s.log, w, r, maxLoginBody, &body); err != nil {
		return err
	}
	var hash string
	if body.Password != nil {
		if err := checkPasswordRules(*body.Password); err != nil {
			return err
		}
		if _, exists := s.auth.users.get(name); !exists {
			return errUserNotFound // before spending bcrypt on it
		}
		var err error
		if hash, err = s.auth.users.hash(*body.Password); err != nil {
			return err
		}
	}
	u, ended, err := s.auth.users.update(name, func(u *user) error {
		if body.Role != nil {
			u.Role = *body.Role
		}
		if body.Description != nil {
			u.Description = *body.Description
		}
		if hash != "" {
			u.Hash = hash
		}
		return nil
	})
	if err != nil {
		return err
	}
	if ended {
		s.auth.endUser(name)
	}
	s.log.Info("dashboard user updated", zap.String("user", name), zap.String("role", string(u.Role)),
		zap.Bool("password_reset", hash != ""), zap.Bool("sessions_ended", ended), zap.String("by", p.User))
	writeJSON(w, http.StatusOK, u)
	return nil
}

// deleteUser serves DELETE /users/{name}; the user's sessions and tokens
// end with it.
func (s *Server) deleteUser(w http.ResponseWriter, _ *http.Request, p principal, name string) error {
	if err := s.auth.users.remove(name); err != nil {
		return err
	}
	s.auth.endUser(name)
	s.log.Info("dashboard user deleted", zap.String("user", name), zap.String("by", p.User))
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "deleted": true})
	return nil
}

// changePassword serves POST /auth/password: a user changes their own
// password, giving the old one. Every session and token of the user ends,
// this one included. A wrong old password counts as a failed login.
func (s *Server) changePassword(w http.ResponseWriter, r *http.Request, p principal, _ string) error {
	var body struct {
		Old string `json:"old_password"`
		New string `json:"new_password"`
	}
	if err := decodeBody(s.log, w, r, maxLoginBody, &body); err != nil {
		return err
	}
	if !p.isUser() {
		return errorf(http.StatusForbidden, "not_a_user",
			fmt.Sprintf("%s is not a dashboard user with a password (API keys and anonymous access have none)", p.User))
	}
	if err := s.auth.throttled(r); err != nil {
		return errorf(http.StatusTooManyRequests, "too_many_failures", err.Error())
	}
	if _, _, ok := s.auth.checkPassword(p.User, body.Old); !ok {
		s.auth.failed(r)
		s.log.Warn("dashboard password change refused: wrong old password", zap.String("user", p.User), zap.String("remote", r.RemoteAddr))
		return errorf(http.StatusForbidden, "wrong_password", "the old password is wrong")
	}
	if err := checkPasswordRules(body.New); err != nil {
		return err
	}
	hash, err := s.auth.users.hash(body.New)
	if err != nil {
		return err
	}
	if _, _, err := s.auth.users.update(p.User, func(u *user) error { u.Hash = hash; return nil }); err != nil {
		return err
	}
	s.auth.endUser(p.User)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true,
		Secure: s.opts.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	s.log.Info("dashboard password changed", zap.String("user", p.User), zap.String("remote", r.RemoteAddr))
	writeJSON(w, http.StatusOK, map[string]any{"changed": true, "sessions_ended": true})
	return nil
}
