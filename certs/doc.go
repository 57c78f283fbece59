// Package certs is xmq's one source of TLS material: certificate files
// reloaded when they change, a self-signed development CA, or certificates
// from an ACME CA (Let's Encrypt) through golang.org/x/crypto/acme/autocert.
//
// Contract:
//
//   - A Source serves certificates through GetCertificate. ServerConfig
//     builds a *tls.Config from it for one listener (TLS 1.2 or later, the
//     listener's client-certificate policy); each transport clones that
//     config and sets its own ALPN list. A Source is safe for concurrent
//     use; the certificate it serves can change between two handshakes
//     (file reload, ACME renewal) and never during one.
//   - Files: Reload re-reads the certificate and key now (SIGHUP); a
//     background check does the same when either file's size or
//     modification time changes. A pair that fails to load leaves the
//     previous certificate in service and is logged.
//   - Development CA: EnsureDev writes ca.pem, ca-key.pem, server.pem and
//     server-key.pem in a directory on first use and reuses them after, so a
//     client always finds the CA at the same place. The server certificate
//     names localhost, 127.0.0.1, ::1, the host name, the addresses of the
//     machine's interfaces (link-local ones excepted) and the names of the
//     directory's hosts file (AddExtraHosts, `xmq certs -host`); it is
//     renewed when it nears its end or stops covering those names, at
//     start and at Reload.
//   - Client certificates: ServerConfig checks them against the
//     listener's CAs and, with ClientAuth.CRLFile, its revocation lists,
//     reloaded like the certificate files. MinVersion and CipherSuites parse
//     a listener's protocol settings.
//   - ACME: certificates only for the configured domains (the HostPolicy
//     whitelist), cached in a directory, obtained with TLS-ALPN-01 on the
//     TLS ports (ALPN "acme-tls/1", which ServerConfig advertises) and,
//     when an HTTP address is set, HTTP-01. A connection that negotiated
//     "acme-tls/1" is a challenge, not a client: the listener closes it.
//
// The package never imports core or listeners (see DESIGN.md).
package certs
