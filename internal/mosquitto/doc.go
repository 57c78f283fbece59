// Package mosquitto turns a Mosquitto 2.0 configuration into xmq's: it is
// the conversion behind `xmq import`.
//
// ReadConf reads mosquitto.conf as Mosquitto does (include_dir in
// Mosquitto's order, listener and bridge blocks, per_listener_settings),
// MaxConfBytes at most; Convert maps it onto a config.Config, never
// failing: every option line becomes a key, or a comment saying why it has
// none; Render writes that document as YAML for `xmq -c`, each key with
// the Mosquitto line it came from, in bounded memory. Password and ACL
// files are used as they are (auth reads Mosquitto's formats); the dynamic
// security plugin's JSON becomes a password file and an ACL file
// (ReadDynsec, ConvertDynsec), checked decision by decision against the
// plugin's rules.
//
// It is not the command: cmd/xmq parses `xmq import`'s flags and writes
// the files. It reads only the files it is given and the ones they
// include, starts nothing, and writes only to the io.Writer it is handed
// and, for ConvertDynsec's check, a temporary ACL file that auth reads.
package mosquitto
