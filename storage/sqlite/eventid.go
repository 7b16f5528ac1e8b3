package sqlite

// Event ids in events.event_id (schema version 12): an id that is a UUID
// in its canonical text (lower-case hexadecimal in groups of 8, 4, 4, 4
// and 12, as uuid.NewString and eventstore.NewEventID give) is stored as
// its 16 bytes, a BLOB; any other id as the TEXT given. A BLOB never
// equals a TEXT, and only canonical text becomes a BLOB, so two ids are
// equal stored exactly when they are equal given.

// uuidDashes are the offsets of the dashes in a UUID's canonical text.
var uuidDashes = [4]int{8, 13, 18, 23}

// eventIDValue returns how id is stored: its 16 bytes when it is a UUID in
// canonical text, else id.
func eventIDValue(id string) any {
	if len(id) != 36 {
		return id
	}
	var b [16]byte
	j := 0
	for i := 0; i < 36; i++ {
		if i == uuidDashes[0] || i == uuidDashes[1] || i == uuidDashes[2] || i == uuidDashes[3] {
			if id[i] != '-' {
				return id
			}
			continue
		}
		hi, ok1 := lowerHex(id[i])
		lo, ok2 := lowerHex(id[i+1])
		if !ok1 || !ok2 { // (no pair spans a dash: the groups have even lengths)
			return id
		}
		b[j] = hi<<4 | lo
		j++
		i++
	}
	return b[:]
}

// lowerHex returns the value of a lower-case hexadecimal digit.
func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// eventIDText returns the id stored as v (see eventIDValue): a 16-byte
// BLOB as the canonical text of the UUID, text as it is.
func eventIDText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case []byte:
		if len(v) != 16 {
			return "", false
		}
		const digits = "0123456789abcdef"
		var out [36]byte
		j := 0
		for i := 0; i < 36; i++ {
			if i == uuidDashes[0] || i == uuidDashes[1] || i == uuidDashes[2] || i == uuidDashes[3] {
				out[i] = '-'
				continue
			}
			out[i], out[i+1] = digits[v[j]>>4], digits[v[j]&0xf]
			j++
			i++
		}
		return string(out[:]), true
	}
	return "", false
}

// eventID returns column i, an events.event_id, as the id given.
func (r *rawRow) eventID(i int) string {
	id, ok := eventIDText(r.dest[i])
	if !ok {
		r.fail(i, "an event id")
	}
	return id
}
