// Package auth decides who may connect to xmq and what they may do: a
// Mosquitto-compatible password file and ACL file, JSON Web Tokens, MQTT 5
// SCRAM, client certificate identities, an operator's HTTP service, and the
// limits that stop abuse cheaply.
//
// Contract:
//
//   - Auth satisfies core's Authenticator (Authenticate), Authorizer
//     (CanPublish, CanSubscribe), LoginAuthenticator (Login),
//     EnhancedAuthenticator (AuthStep) and ConnectionObserver
//     (ClientDisconnected) with plain parameters; the
//     package never imports core (see DESIGN.md). A refusal is an error
//     wrapping a codec.ReasonCode, which core sends in CONNACK; its text is
//     for the server log and never holds a password or hash.
//   - Anonymous access (no user name) follows Options.AllowAnonymous,
//     overridable per listener; the default, AnonymousLoopback, admits
//     anonymous clients only from loopback addresses. Without a password
//     file user names are not checked at all, so every client is under
//     the anonymous policy. On a listener in Options.CertListeners the
//     user name is the client certificate's identity, set by the
//     listener, and is accepted without a password.
//   - Tokens: with Options.JWT, a password in the form of a JWT is checked
//     as one (jwt.go): signature (HMAC secret, PEM public keys, JWK Sets
//     from a file or a URL), exp, nbf, iat, iss, aud; the user name comes
//     from a claim, and an ACL claim applies to that connection before the
//     ACL file. A token check takes no hash-queue turn, but a refused token
//     counts toward the failed-login limit. Login (core's
//     LoginAuthenticator) returns the token's user and exp, at which core
//     closes the connection. With JWT and no password file, a user name
//     needs a token.
//   - Passwords: see passwd.go for the file format. Mosquitto's $7$
//     (PBKDF2-SHA512) and $6$ entries are read as they are; SetPassword,
//     DeleteUser and HashPlaintext (passwdfile.go) edit a file in place,
//     writing bcrypt plus SCRAM-SHA-256 and SCRAM-SHA-1 credentials by
//     default (the xmq passwd command line is cmd/xmq's). Each attempt checks at most one hash, an unknown user
//     against a stand-in of the same kind and cost, and compares in
//     constant time; logins with the same credentials at once share one
//     check (logincache.go). The login cache never holds a password: it
//     keeps an HMAC, under a key made at start, of user name, password and
//     the file's hash, and belongs to one load of the password file.
//   - ACLs: see acl.go for the rules. PUBLISH decisions are cached per
//     (client id, user name, topic) in a bounded cache that belongs to one
//     generation of the ACL file; a reload starts a new generation with an
//     empty cache. CanPublish on a cache hit allocates nothing.
//   - Reload: the files are re-read when their size or modification time
//     changes (polled every Options.ReloadInterval) and on Reload (SIGHUP).
//     A file that fails to load leaves the previous version in force.
//     Nothing is disconnected: new rules apply to the next packet of every
//     connection, new passwords to the next CONNECT.
//   - Limits, in the order a CONNECT meets them: per-source connection
//     rate (Connection Rate Exceeded), bans by client id, user name,
//     address prefix or flapping identity (Banned), the failed-login
//     lockout (Not Authorized, no hash checked), the login cache (a login
//     proved within LoginCacheTTL is admitted without a hash), then the
//     hash queue (hashqueue.go): at most MaxHashes checks at once, turns
//     handed out fairly between source addresses, a source never running
//     more checks than the failures it has left before its lockout, and
//     Server Busy when the queue is full or no turn comes within
//     HashWait. Only a wrong password or an unknown user is a failure; a
//     check in progress is not. Flapping identities (client id with
//     verified user name, else with source address; never a client id
//     alone) are banned through ClientDisconnected. Stats counts
//     everything; Ban, Unban and Bans edit the list at run time.
//   - HTTP (httpauth.go): with Options.HTTP.URL, a CONNECT with a user
//     name is POSTed to the operator's service after the rate and ban
//     checks, which answers allow, deny or ignore (the files decide, as
//     without it); with ACLURL, PUBLISH topics, wills and SUBSCRIBE
//     filters are too, before the ACL file, and deliveries never are.
//     Requests are bounded (MaxInflight, fair between sources for
//     CONNECT), time out, and fail closed unless FailOpen. Answers are
//     cached for CacheTTL: CONNECT allow and ignore by an HMAC of the
//     fields CacheKey names (never a password), ACL answers per client
//     and topic; logins alike in flight at once share one request.
//   - Bans set through Ban are kept in Options.BanStore (the on-disk
//     store, wired by cmd/xmq; auth declares the interface and encodes
//     the records) and restored by New, expired ones dropped; flapping
//     bans live in memory only.
//
// Auth logs reloads, bans and refusals to Options.Log, a *zap.Logger, as
// the rest of xmq does. Every method is safe for concurrent use. Close
// stops the file watch.
package auth
