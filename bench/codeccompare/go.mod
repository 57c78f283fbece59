module xmq/bench/codeccompare

go 1.26.0

require (
	github.com/eclipse/paho.golang v0.23.0
	github.com/mochi-mqtt/server/v2 v2.7.9
	xmq v0.0.0
)

replace xmq => ../..
