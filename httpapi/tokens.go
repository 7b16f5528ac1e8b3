package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"time"
)

// deleteTokenTTL is how long a delete token is valid.
const deleteTokenTTL = 10 * time.Minute

// deleteTokens issues and checks the tokens of the two-step deletion.
// They are stateless: a token is its expiry and an HMAC-SHA256, under a
// key of the handler, over the deletion's scope (the aggregate or type)
// and that expiry. A token thus deletes only what it was issued for, only
// until it expires, and only on handlers that share the key
// (Options.DeleteTokenKey; by default each handler draws its own).
type deleteTokens struct {
	key []byte
	now func() time.Time
}

func newDeleteTokens(key []byte) *deleteTokens {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // crypto/rand.Read never fails
	}
	return &deleteTokens{key: key, now: time.Now}
}

// aggregateScope and typeScope name what a token deletes; the NUL
// separators cannot occur in types and ids.
func aggregateScope(typ, id string) string { return "aggregate\x00" + typ + "\x00" + id }
func typeScope(typ string) string          { return "type\x00" + typ }

func (d *deleteTokens) mac(scope string, expiry int64) []byte {
	m := hmac.New(sha256.New, d.key)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(expiry))
	m.Write(b[:])
	m.Write([]byte(scope))
	return m.Sum(nil)
}

// issue returns a token for scope, valid for deleteTokenTTL.
func (d *deleteTokens) issue(scope string) string {
	expiry := d.now().Add(deleteTokenTTL).Unix()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(expiry))
	return base64.RawURLEncoding.EncodeToString(b[:]) + "." + base64.RawURLEncoding.EncodeToString(d.mac(scope, expiry))
}

// valid reports whether token was issued for scope and has not expired.
func (d *deleteTokens) valid(scope, token string) bool {
	if len(token) > maxTokenLen {
		return false
	}
	exp, sum, ok := strings.Cut(token, ".")
	if !ok {
		return false
	}
	eb, err1 := base64.RawURLEncoding.DecodeString(exp)
	mac, err2 := base64.RawURLEncoding.DecodeString(sum)
	if err1 != nil || err2 != nil || len(eb) != 8 {
		return false
	}
	expiry := int64(binary.BigEndian.Uint64(eb))
	if !hmac.Equal(mac, d.mac(scope, expiry)) {
		return false
	}
	return d.now().Unix() < expiry
}
