module github.com/clustron/zaris-go/tools

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/apache/thrift v0.25.0
	github.com/clustron/zaris-go v0.0.0
	github.com/golang/mock v1.6.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.25.0 // indirect
)

replace github.com/clustron/zaris-go => ../
