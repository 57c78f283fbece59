module xmq

go 1.26.0

require (
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/net v0.62.0
)

require go.uber.org/multierr v1.10.0 // indirect
