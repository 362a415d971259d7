package runtime

import "github.com/clustron/zaris-go/gen/zaris"

// kvStatus is the status of a generated response, as the IDL's enum.
func kvStatus(resp Response) zaris.KvStatus {
	if r, ok := resp.(interface{ GetStatus() zaris.KvStatus }); ok {
		return r.GetStatus()
	}
	return -1
}

// statusOf is Op.Status of the test ops.
func statusOf(resp Response) Status { return Status(kvStatus(resp)) }
