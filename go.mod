module xmq

go 1.26
