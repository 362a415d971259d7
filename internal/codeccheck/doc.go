// Package codeccheck holds the generated codec (gen/zariscodec) to the Thrift library's
// binary protocol: its tests encode random values of every type with both and compare the
// bytes, and decode what the library encoded, and random bytes, with both and compare the
// values (or that both refuse them). It has no code of its own.
package codeccheck
