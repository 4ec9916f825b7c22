// Package hashslot computes Redis Cluster hash slots, for the Redis store
// (which places a queue's partitions on distinct slots) and the tests that
// check where keys land.
package hashslot

import "strings"

// Count is the number of hash slots of a Redis Cluster.
const Count = 16384

// Of returns the Cluster hash slot of key: CRC16 (XMODEM) of the key, or
// of its hash tag (the part between the first "{" and the next "}", when
// that is not empty), modulo Count.
func Of(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % Count
}
