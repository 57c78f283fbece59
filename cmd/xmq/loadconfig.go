package main

import (
	"os"

	"github.com/xmq-io/xmq/internal/config"
)

// checks are the rules of the configuration sections whose packages
// internal/config does not import (web.go, cluster.go).
var checks = config.Checks{Web: validateWeb, Cluster: validateCluster}

// loadConfig builds the configuration from defaults, the file named by
// -c/-config, the XMQ_ environment variables and the flags, in that order
// of precedence (flags win).
func loadConfig(args []string) (config.Config, error) {
	cfg, _, err := loadConfigEnv(args, os.Environ())
	return cfg, err
}

// loadConfigEnv is loadConfig with the environment given (os.Environ's
// form); it also says which keys the environment and the flags set.
func loadConfigEnv(args, env []string) (config.Config, config.Sources, error) {
	return config.LoadEnv(args, env, checks)
}

// loadConfigOrigin is loadConfigEnv that still returns what it could make
// of a configuration with mistakes, and where every key came from
// (check-config).
func loadConfigOrigin(args, env []string) (config.Config, config.Origin, error) {
	return config.LoadOrigin(args, env, checks)
}
