package jobs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
)

// SignWebhook returns the webhook-signature header value of the Standard Webhooks scheme:
// "v1," + base64 of HMAC-SHA256 under key of id + "." + timestamp + "." + body, where key is
// the signing secret's bytes (see models.WebhookKey) and timestamp is in unix seconds.
func SignWebhook(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
