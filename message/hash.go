package message

import "unicode/utf8"

// TagsCode is the consume-queue tags code of a TAGS value: Java String.hashCode over UTF-16 code
// units with 32-bit wrap-around, sign-extended to 64 bits; 0 for no tag. Pull filtering compares
// (int) tagsCode with the subscription's codes, so it must match Java bit for bit.
func TagsCode(tags string) int64 {
	if tags == "" {
		return 0
	}
	return int64(JavaHash(0, tags))
}

// TagsCodeBytes is TagsCode over bytes, without allocating (store hot path), or over a string
// the store did not have to convert (storage.Scanned).
func TagsCodeBytes[T string | []byte](tags T) int64 {
	if len(tags) == 0 {
		return 0
	}
	return int64(JavaHash(0, tags))
}

// IndexKeyHash is the index-file key hash of a full index key ("<topic>#<key>", §6.4): the
// absolute value of Java's hashCode, or 0 if it is still negative (Integer.MIN_VALUE).
func IndexKeyHash(key string) int32 {
	return absHash(JavaHash(0, key))
}

// IndexKeyHashParts is IndexKeyHash(topic + "#" + key) computed without building the string.
// The key may be a string: the store hashes keys read from a record's bytes or, when the send
// path already read them, from the request's properties (storage.Scanned).
func IndexKeyHashParts[K string | []byte](topic []byte, key K) int32 {
	h := JavaHash(0, topic)
	h = 31*h + '#'
	return absHash(JavaHash(h, key))
}

func absHash(h int32) int32 {
	if h < 0 {
		h = -h
	}
	if h < 0 {
		return 0
	}
	return h
}

// JavaHash continues Java's String.hashCode from h over the UTF-8 text s, as Java would see the
// decoded string: each rune is one UTF-16 code unit, or a surrogate pair above U+FFFF; invalid
// UTF-8 bytes count as U+FFFD, as Java's decoder replaces them.
func JavaHash[T string | []byte](h int32, s T) int32 {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		var r rune
		var n int
		switch v := any(s).(type) {
		case string:
			r, n = utf8.DecodeRuneInString(v[i:])
		case []byte:
			r, n = utf8.DecodeRune(v[i:])
		}
		i += n
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}
