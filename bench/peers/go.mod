module xmq/bench/peers

go 1.26.0

require (
	github.com/mochi-mqtt/server/v2 v2.7.9
	xmq v0.0.0
)

require (
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/rs/xid v1.4.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace xmq => ../..
