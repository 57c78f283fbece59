package main

import (
	"go.uber.org/zap"

	"github.com/xmq-io/xmq/auth"
	"github.com/xmq-io/xmq/internal/config"
)

// authUsage documents the auth flags in printUsage.
const authUsage = `  -password-file FILE
        password file: Mosquitto's (mosquitto_passwd) or xmq passwd's.
        Clients with a user name must match it. Overrides auth.password_file.
  -acl-file FILE
        ACL file in Mosquitto's acl_file syntax. Overrides auth.acl_file.
`

// newAuth builds the authenticator and authorizer of a run; bans (nil
// without a data directory) keeps the bans set at run time.
func newAuth(cfg *config.Config, bans auth.BanStore, log *zap.Logger) (*auth.Auth, error) {
	alog := log.Named("auth")
	opts := cfg.AuthOptions()
	opts.Log = alog
	opts.BanStore = bans
	a, err := auth.New(opts)
	if err != nil {
		return nil, err
	}
	switch {
	case cfg.Auth.PasswordFile == "" && opts.JWT.Enabled():
		alog.Info("no password file: user names need a token (auth.jwt); anonymous access per allow_anonymous")
	case cfg.Auth.PasswordFile == "":
		opts.SetDefaults()
		alog.Info("no password file: user names are not checked; anonymous access per allow_anonymous",
			zap.String("allow_anonymous", string(opts.AllowAnonymous)))
	}
	return a, nil
}
