package store

import "sync"

// portLimits bound what an internal port (peer or coordinator) buffers before it judges a
// request: a request frame over maxRequest closes its connection as soon as its length is
// read, every frame buffer of the port takes its bytes from budget as they arrive, and a
// connection over maxConns is closed at once. A flood of half-sent frames so holds at most
// budget, plus a small read and write buffer per connection.
type portLimits struct {
	maxRequest int32 // the largest request frame
	maxReply   int32 // the largest reply frame (a segment copy)
	maxConns   int
	budget     *byteBudget
}

// Internal ports' limits; variables so that tests can make them small.
var (
	// internalBudget is the bytes of request frames one internal port holds at once.
	internalBudget int64 = 128 << 20
	// internalMaxConns is the most connections one internal port keeps open.
	internalMaxConns = 1024
)

// internalBufferSize is the read and write buffer of an internal port's connection.
const internalBufferSize = 16 << 10

// newPortLimits returns the limits of an internal port whose requests are at most maxRequest.
func newPortLimits(maxRequest int32) *portLimits {
	return &portLimits{
		maxRequest: maxRequest,
		maxReply:   peerMaxMessage,
		maxConns:   internalMaxConns,
		budget:     &byteBudget{max: internalBudget},
	}
}

// byteBudget is the framing.Budget of an internal port. A Reserve it cannot give at once is
// refused: that frame's connection closes, and its bytes come back at once.
type byteBudget struct {
	max int64

	mu      sync.Mutex // protects everything below
	used    int64
	peak    int64
	refused int64 // Reserves refused
}

func (b *byteBudget) Reserve(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+int64(n) > b.max {
		b.refused++
		return false
	}
	b.used += int64(n)
	b.peak = max(b.peak, b.used)
	return true
}

func (b *byteBudget) Release(n int) {
	b.mu.Lock()
	b.used -= int64(n)
	b.mu.Unlock()
}

// usage returns the bytes held now, the most ever held at once, and how many Reserves were
// refused.
func (b *byteBudget) usage() (used, peak, refused int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak, b.refused
}
