package clustermap

import "hash/crc32"

// SegmentOf returns the segment that owns key in a map of segmentCount segments: the CRC-32
// (IEEE) of the key bytes modulo segmentCount. The client routes with it and the store
// places data with it, so both always agree. segmentCount must be positive.
func SegmentOf(key []byte, segmentCount int32) int32 {
	return int32(crc32.ChecksumIEEE(key) % uint32(segmentCount))
}
