package clustermap

import "time"

// A refresh request's Evidence, what it led to and a refresher's counts. Rule B7 in the
// middleware package's documentation says how evidence decides whether a request needs a
// fetch of its own.

// Evidence is what a refresh request knows of the churn behind it: the newest map epoch an
// answer showed (0 if none) and when the client saw the churn, on the client's Clock. A completed
// fetch satisfies the request only if it started at or after At (rule B7); a zero At is
// satisfied by any fetch completed within the debounce window, as rule R6 alone says.
type Evidence struct {
	// Epoch is the newest map epoch an answer showed, or 0.
	Epoch int64
	// At is when the attempt that asked for the refresh ended, or zero.
	At time.Time
}

// RefreshResult is what one request for a map refresh led to.
type RefreshResult struct {
	// Performed reports that a map fetch ran for this request (this caller led it or joined
	// the flight that ran it) and completed with a map (installed or not, see Epoch).
	Performed bool
	// Coalesced reports that the request joined a fetch already in flight.
	Coalesced bool
	// Debounced reports that the request was a no-op: a refresh completed within the
	// debounce window and no answer showed a newer epoch.
	Debounced bool
	// Deferred reports that the request was debounced although its evidence is newer than
	// the start of the last completed fetch: a fetch of its own runs at the end of the
	// debounce window, without the caller waiting for it (rule B7).
	Deferred bool
	// TimedOut reports that the caller stopped waiting (refresh wait, its own context, or
	// the bound of AwaitOwner) while the fetch went on for the others.
	TimedOut bool
	// Epoch is the client's map epoch when the request returned.
	Epoch int64
	// Err is the fetch's error, if it failed.
	Err error
}

// RefreshStats counts a map refresher's work (runtime.Refresher) since it was made. Once
// no request is in flight, Requested = Debounced + Coalesced + OwnerWaits + the requests
// that led a fetch (+ those refused after Close); Performed counts fetches that returned a
// map, Failed those that did not. Each call of Refresh or AwaitOwner starts at most one
// fetch that is not Background, so Performed - Background never exceeds those calls.
type RefreshStats struct {
	// Requested counts calls of Refresh and AwaitOwner, and background requests (B6).
	Requested uint64
	// Performed counts map fetches that completed with a map (whoever asked for them,
	// Observe included).
	Performed uint64
	// Coalesced counts requests that joined a fetch already in flight.
	Coalesced uint64
	// Debounced counts requests that were no-ops inside the debounce window.
	Debounced uint64
	// Deferred counts the debounced requests whose evidence no completed fetch had seen,
	// each then satisfied by a fetch at the end of the window (B7); a part of Debounced.
	Deferred uint64
	// OwnerWaits counts calls of AwaitOwner (B7), whatever fetches they rode.
	OwnerWaits uint64
	// TimedOut counts requests whose caller stopped waiting before the fetch completed.
	TimedOut uint64
	// Failed counts map fetches that ended without a map.
	Failed uint64
	// Background counts the fetches among Performed that no call of Refresh or AwaitOwner
	// started when it was made: those started by an answer's newer epoch (Observe, B1), by
	// a silent node (B6), at the end of the debounce window for deferred requests (B7), and
	// an owner wait's fetches after its first (B7: one a window while the map still names
	// the node it could not reach).
	Background uint64
}
