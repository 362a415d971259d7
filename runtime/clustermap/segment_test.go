package clustermap

import (
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSegmentOf(t *testing.T) {
	for _, tc := range []struct {
		key   string
		count int32
		want  int32
	}{
		{"", 64, 0},
		// CRC-32/IEEE("123456789") is the standard check value 0xCBF43926.
		{"123456789", 1 << 16, 0x3926},
		{"123456789", 64, int32(0xCBF43926 % 64)},
		{"user:42", 1, 0},
	} {
		t.Run(tc.key, func(t *testing.T) {
			assert.Equal(t, tc.want, SegmentOf([]byte(tc.key), tc.count))
		})
	}
	assert.Equal(t, uint32(0xCBF43926), crc32.ChecksumIEEE([]byte("123456789")))
}
