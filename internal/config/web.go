package config

import (
	"flag"
	"time"
)

// Web is the web section: the dashboard, admin API and metrics
// server (web.Options with YAML names).
type Web struct {
	// Address is host:port of the HTTP(S) server; "" turns it off. The
	// default, 127.0.0.1:18083, keeps the admin API off the network.
	Address string `yaml:"address"`
	// TLS serves HTTPS with the broker's certificate (tls files, acme or
	// the development CA).
	TLS bool `yaml:"tls"`
	// AdminUser is the dashboard's admin login.
	AdminUser string `yaml:"admin_user"`
	// AdminPasswordHash is the admin's bcrypt hash. XMQ_ADMIN_PASSWORD
	// wins over it; with neither, xmq generates a password at first start.
	AdminPasswordHash string `yaml:"admin_password_hash" secret:"true"`
	// APIKeys maps a key's name to its SHA-256 and role.
	APIKeys map[string]APIKey `yaml:"api_keys"`
	// AllowAnonymousLoopback lets requests from this machine in without
	// credentials, as admin.
	AllowAnonymousLoopback bool `yaml:"allow_anonymous_loopback"`
	// SessionTTL is how long a dashboard login lasts.
	SessionTTL time.Duration `yaml:"session_ttl"`
}

// APIKey is one API key: only its hash is configured.
type APIKey struct {
	SHA256 string `yaml:"sha256" secret:"true"` // hex SHA-256 of the key
	Role   string `yaml:"role"`                 // viewer or admin
}

// AdminPasswordEnv names the environment variable with the admin password.
const AdminPasswordEnv = "XMQ_ADMIN_PASSWORD"

// The web section's defaults: web's own DefaultAddress, DefaultAdminUser
// and DefaultSessionTTL, restated because config does not import web (it
// links the dashboard server); cmd/xmq's TestExampleWebIsDefault keeps them equal.
const (
	defaultWebAddress    = "127.0.0.1:18083"
	defaultWebAdminUser  = "admin"
	defaultWebSessionTTL = 12 * time.Hour
)

func defaultWebConfig() Web {
	return Web{Address: defaultWebAddress, AdminUser: defaultWebAdminUser, SessionTTL: defaultWebSessionTTL}
}

// setDefaults normalizes what YAML may leave empty.
func (w *Web) setDefaults() {
	if len(w.APIKeys) == 0 {
		w.APIKeys = nil
	}
}

// webFlags are the command-line flags of the web section.
type webFlags struct{ address string }

func addWebFlags(fs *flag.FlagSet, f *webFlags) {
	fs.StringVar(&f.address, "web", "", `dashboard, admin API and metrics address; "" turns them off`)
}

func (f *webFlags) apply(cfg *Config, set map[string]bool) {
	if set["web"] {
		cfg.Web.Address = f.address
	}
}
