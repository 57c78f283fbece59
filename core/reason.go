package core

// CloseReason is why a connection ended. Every disconnect has one; it feeds
// the disconnect log line and the metrics label.
type CloseReason uint8

// Close reasons.
const (
	CloseNone           CloseReason = iota
	CloseNormal                     // client sent DISCONNECT
	CloseDisconnectWill             // MQTT 5 DISCONNECT with reason 0x04: publish the will
	ClosePeerGone                   // EOF or network error without DISCONNECT
	CloseKeepAlive                  // no packet within 1.5 × keepalive
	CloseConnectTimeout             // no CONNECT in time
	CloseMalformed                  // undecodable packet
	CloseProtocolError              // decodable packet that breaks the protocol
	ClosePacketTooLarge             // packet over the maximum packet size
	CloseTakenOver                  // another connection took the session over
	CloseAuthFailed                 // CONNECT refused by authentication
	CloseRefused                    // CONNECT refused for another reason (version, id, limits)
	CloseSlowConsumer               // writer blocked past WriteTimeout, or queue overflow with the disconnect policy
	CloseServerShutdown             // the server is stopping
	CloseAdmin                      // an operator disconnected the client
	CloseStoreError                 // the store could not make an MQTT 3 client's messages durable
	CloseNotAuthorized              // CONNECT refused by authorization: another user's session, a will the client may not have
	CloseBusy                       // refused before CONNECT was read: the pre-login memory budget was spent
	CloseLoginExpired               // the login ended (a token's exp: LoginAuthenticator)
	closeReasonCount
)

var closeNames = [...]string{"none", "normal", "disconnect_with_will", "peer_gone", "keepalive_timeout",
	"connect_timeout", "malformed_packet", "protocol_error", "packet_too_large", "taken_over",
	"auth_failure", "connect_refused", "slow_consumer", "server_shutdown", "admin",
	"store_error", "not_authorized", "server_busy", "login_expired"}

func (r CloseReason) String() string {
	if int(r) < len(closeNames) {
		return closeNames[r]
	}
	return "unknown"
}

// publishesWill reports whether a connection closed for r sends its will.
func (r CloseReason) publishesWill() bool {
	return r != CloseNormal && r != CloseAuthFailed && r != CloseRefused && r != CloseNotAuthorized &&
		r != CloseBusy && r != CloseNone
}
