package listeners

import "github.com/xmq-io/xmq/internal/sockio"

// On Linux a WebSocket conn over plain TCP reads and writes its socket
// with raw system calls (internal/sockio: no wake-up of the runtime's
// monitor thread per call, as core does for plain TCP), its in-place
// frames included.
const rawSocketIO = true

var (
	writeSocketNow = sockio.WriteNow
	writeSocket    = sockio.Write
	readSocket     = sockio.Read
)
