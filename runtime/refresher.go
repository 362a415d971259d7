package runtime

// RefreshResult is what one request for a map refresh led to.
type RefreshResult struct {
	// Performed reports that a map fetch ran for this request (this caller led it or joined
	// the flight that ran it) and completed.
	Performed bool
	// Coalesced reports that the request joined a fetch already in flight.
	Coalesced bool
	// Debounced reports that the request was a no-op: a refresh completed within the
	// debounce window and no answer showed a newer epoch.
	Debounced bool
	// TimedOut reports that the caller stopped waiting (refresh wait or its own context)
	// while the fetch went on for the others.
	TimedOut bool
	// Epoch is the client's map epoch when the request returned.
	Epoch int64
	// Err is the fetch's error, if it failed.
	Err error
}
