package runtime

// BatchItems is the batch engine's view of one multi-key call, whatever its types. The
// engine never sees the typed request; batch.Run builds one over a batch.Spec.
type BatchItems interface {
	// Len returns the number of items.
	Len() int
	// Key returns item i's routing key.
	Key(i int) []byte
	// Invalid reports whether item i is missing or has an empty key: batch.Run answers it
	// InvalidRequest without sending it.
	Invalid(i int) bool
	// Guarded reports whether a replay of item i comes back Conflict.
	Guarded(i int) bool
	// SubRequest returns a request carrying the items idx, in that order.
	SubRequest(idx []int) any
	// Record takes a sub-response to SubRequest(idx): it keeps each item's result and returns
	// their statuses. A response whose own status is not Ok gives every item that status. It
	// fails when resp is not of the operation's type or its results do not match idx.
	Record(resp Response, idx []int) ([]Status, error)
	// Response returns the merged response, with epoch as its map epoch. An item without a
	// recorded result gets one with status Unavailable.
	Response(epoch int64) Response
	// Size returns about how many bytes item i adds to a request (its keys' and values'
	// lengths and a few bytes per field), or 0 when not known. The batch layer splits an
	// owner's items into sub-requests of a bounded size by it, so a batch of large values
	// fits the node's message limit.
	Size(i int) int
}

// Batch is what a multi-key Call carries besides the ordinary fields: its items, and what
// the batch engine found per item. Call-level middleware sees it once per call.
type Batch struct {
	// Items are the call's items.
	Items BatchItems
	// Errs has one entry per item once the engine has run: nil for an item that got an
	// answer (Ok, NotFound, Conflict, InvalidRequest), else the item's error: a *CallError
	// with the item's own attempts, wrapping ErrInDoubt for an item that was sent, got no
	// reply and is not replayed (rule B2).
	Errs []error
	// Attempts has, once the engine has run, each item's own attempts, oldest first: an
	// item's attempt is its sub-request's, with the item's status and class. Items one
	// sub-request answered with the same status share the record of that first attempt,
	// so the histories are to be read, not written.
	Attempts [][]Attempt
	// Stats counts the engine's work.
	Stats BatchStats
	// Ran is set by the batch engine when it has handled the call.
	Ran bool
}

// BatchStats counts what a multi-key call cost.
type BatchStats struct {
	// Rounds counts the rounds of sub-requests: 1 when no item met churn.
	Rounds int
	// SubRequests counts the sub-requests sent (or tried): per round, one per owner, or
	// more when the batch layer cuts an owner's items (by size, or in halves after a
	// sub-request failed on its connection).
	SubRequests int
	// ItemsRetried counts item retries: an item sent in three rounds counts 2.
	ItemsRetried int
}
