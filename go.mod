module xmq

go 1.26

require go.uber.org/zap v1.28.0

require (
	go.uber.org/multierr v1.10.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
