package config

import (
	"flag"
	"time"

	"github.com/xmq-io/xmq/auth"
)

// Auth is the auth section: password and ACL files, the anonymous
// policy and the abuse limits (auth.Options with YAML names). Zero values
// mean auth's defaults, as in auth.Options, so the defaults live in one
// place: auth.
type Auth struct {
	PasswordFile       string         `yaml:"password_file"`
	ACLFile            string         `yaml:"acl_file"`
	AllowAnonymous     auth.Anonymous `yaml:"allow_anonymous"`
	ReloadInterval     time.Duration  `yaml:"reload_interval"`
	ACLCacheSize       int            `yaml:"acl_cache_size"`
	LoginCacheTTL      time.Duration  `yaml:"login_cache_ttl"`
	MaxFailedLogins    int            `yaml:"max_failed_logins"`
	FailedLoginWindow  time.Duration  `yaml:"failed_login_window"`
	FailedLoginBan     time.Duration  `yaml:"failed_login_ban"`
	ConnectionRate     float64        `yaml:"connection_rate"`
	ConnectionBurst    int            `yaml:"connection_burst"`
	FlapMax            int            `yaml:"flap_max"`
	FlapWindow         time.Duration  `yaml:"flap_window"`
	FlapBan            time.Duration  `yaml:"flap_ban"`
	MaxHashes          int            `yaml:"max_hashes"`
	HashWait           time.Duration  `yaml:"hash_wait"`
	HashQueuePerSource int            `yaml:"hash_queue_per_source"`
	HashQueue          int            `yaml:"hash_queue"`
	// JWT is JSON Web Token authentication: off without a key source.
	JWT JWT `yaml:"jwt"`
	// HTTP is an operator's authentication service: off without a url.
	HTTP HTTPAuth `yaml:"http"`
}

// JWT is auth.jwt (auth.JWTOptions with YAML names). Its keys are
// files or a URL, never a secret itself, so config print shows them all.
type JWT struct {
	SecretFile    string        `yaml:"secret_file"`
	PublicKeyFile string        `yaml:"public_key_file"`
	JWKSFile      string        `yaml:"jwks_file"`
	JWKSURL       string        `yaml:"jwks_url"`
	JWKSRefresh   time.Duration `yaml:"jwks_refresh"`
	UsernameClaim string        `yaml:"username_claim"`
	ACLClaim      string        `yaml:"acl_claim"`
	Issuer        string        `yaml:"issuer"`
	Audience      string        `yaml:"audience"`
	Leeway        time.Duration `yaml:"leeway"`
}

func (j JWT) Options() auth.JWTOptions {
	return auth.JWTOptions{SecretFile: j.SecretFile, PublicKeyFile: j.PublicKeyFile, JWKSFile: j.JWKSFile,
		JWKSURL: j.JWKSURL, JWKSRefresh: j.JWKSRefresh, UsernameClaim: j.UsernameClaim, ACLClaim: j.ACLClaim,
		Issuer: j.Issuer, Audience: j.Audience, Leeway: j.Leeway}
}

// HTTPAuth is auth.http: an operator's HTTP service that decides
// CONNECTs and, with acl_url, PUBLISH and SUBSCRIBE (auth.HTTPOptions,
// docs/auth-http.md). Changes need a restart; the TLS files are read at
// each new connection to the service.
type HTTPAuth struct {
	URL         string            `yaml:"url"`
	ACLURL      string            `yaml:"acl_url"`
	Timeout     time.Duration     `yaml:"timeout"`
	QueueWait   time.Duration     `yaml:"queue_wait"`
	CacheTTL    time.Duration     `yaml:"cache_ttl"`
	CacheKey    auth.HTTPCacheKey `yaml:"cache_key"`
	MaxInflight int               `yaml:"max_inflight"`
	FailOpen    bool              `yaml:"fail_open"`
	TLS         ClientTLS         `yaml:"tls"`
}

// AuthOptions builds auth.Options from the auth section and the listeners:
// their allow_anonymous overrides, and the listeners whose username is a
// certificate identity.
func (c *Config) AuthOptions() auth.Options {
	a := c.Auth
	o := auth.Options{
		PasswordFile: a.PasswordFile, ACLFile: a.ACLFile, AllowAnonymous: a.AllowAnonymous,
		ListenerAnonymous: map[string]auth.Anonymous{},
		ReloadInterval:    a.ReloadInterval, ACLCacheSize: a.ACLCacheSize, LoginCacheTTL: a.LoginCacheTTL,
		Limits: auth.Limits{
			MaxFailedLogins: a.MaxFailedLogins, FailedLoginWindow: a.FailedLoginWindow, FailedLoginBan: a.FailedLoginBan,
			ConnectionRate: a.ConnectionRate, ConnectionBurst: a.ConnectionBurst,
			FlapMax: a.FlapMax, FlapWindow: a.FlapWindow, FlapBan: a.FlapBan,
			MaxHashes: a.MaxHashes, HashWait: a.HashWait, HashQueuePerSource: a.HashQueuePerSource, HashQueue: a.HashQueue,
		},
		JWT: a.JWT.Options(),
		HTTP: auth.HTTPOptions{
			URL: a.HTTP.URL, ACLURL: a.HTTP.ACLURL, Timeout: a.HTTP.Timeout, QueueWait: a.HTTP.QueueWait,
			CacheTTL: a.HTTP.CacheTTL, CacheKey: a.HTTP.CacheKey, MaxInflight: a.HTTP.MaxInflight, FailOpen: a.HTTP.FailOpen,
			CAFile: a.HTTP.TLS.CAFile, CertFile: a.HTTP.TLS.CertFile, KeyFile: a.HTTP.TLS.KeyFile, ServerName: a.HTTP.TLS.ServerName,
		},
	}
	for _, l := range c.Listeners {
		if l.AllowAnonymous != "" {
			o.ListenerAnonymous[l.Name] = l.AllowAnonymous
		}
		if l.TLS.IdentityAsUsername != "" {
			o.CertListeners = append(o.CertListeners, l.Name)
		}
	}
	return o
}

// validateAuth checks the auth section and the listeners' allow_anonymous.
func (c *Config) validateAuth(ps *Problems) {
	ap := Path("auth")
	oneOf(ps, ap.With("allow_anonymous"), c.Auth.AllowAnonymous, "an anonymous policy", "", auth.AnonymousAllow, auth.AnonymousDeny, auth.AnonymousLoopback)
	oneOf(ps, ap.With("http", "cache_key"), c.Auth.HTTP.CacheKey, "a cache key", "", auth.HTTPCacheClient, auth.HTTPCacheCredentials)
	o := c.AuthOptions()
	o.SetDefaults()
	o.AllowAnonymous, o.ListenerAnonymous = auth.AnonymousLoopback, nil // checked with their keys
	o.JWT = auth.JWTOptions{}                                           // checked below, under its own key
	o.HTTP.CacheKey = auth.HTTPCacheClient
	ps.AddErr(ap, o.Validate())
	jo := auth.Options{JWT: c.Auth.JWT.Options()}
	jo.SetDefaults()
	ps.AddErr(ap.With("jwt"), jo.Validate())
}

// authFlags are the command-line flags of the auth section.
type authFlags struct {
	passwordFile string
	aclFile      string
}

func addAuthFlags(fs *flag.FlagSet, f *authFlags) {
	fs.StringVar(&f.passwordFile, "password-file", "", "password file (mosquitto_passwd or xmq passwd format)")
	fs.StringVar(&f.aclFile, "acl-file", "", "ACL file (Mosquitto acl_file syntax)")
}

// apply puts the flags that were given over the configuration.
func (f *authFlags) apply(cfg *Config, set map[string]bool) {
	if set["password-file"] {
		cfg.Auth.PasswordFile = f.passwordFile
	}
	if set["acl-file"] {
		cfg.Auth.ACLFile = f.aclFile
	}
}
