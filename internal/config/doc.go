// Package config is xmq's configuration document and its layers: the
// sections (Config and the types of its keys, each the YAML face of a
// library's options), the defaults, the XMQ_ environment, the command-line
// flags, the checks that name a key path and suggest the fix (Errors), the
// printout of `xmq config print` (secrets redacted) and the key-by-key
// difference a reload acts on.
//
// The layers apply in order: Default, then the file named by -c (ReadFile,
// every unknown key and malformed value reported at once with its line),
// then the environment, then the flags; LoadEnv does all of them and
// Validate. Where a section mirrors a library's options, its zero values
// mean the library's defaults and its Options method maps it (Broker to
// core.Options, Store to store.Options, JWT to auth.JWTOptions,
// Config.AuthOptions, Config.BridgeConfigs, Config.ListenerOptions);
// Effective spells those defaults out, asking the libraries.
//
// It is data only: it starts nothing, opens no socket and no store, and
// reads no file but the configuration file and the cluster's secret_file.
// It imports the option types and checks of the packages it configures
// (core, auth, store, bridge, listeners, certs) but never web or cluster,
// whose packages link a server: their sections' rules reach Validate as
// Checks from cmd/xmq, which builds the running broker from a Config.
// Nothing here is safe for concurrent mutation; a Config is a value that
// callers copy.
package config
