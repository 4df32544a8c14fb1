package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluiceml/sluice/client"
)

// A client for a server, one prediction.
func Example() {
	c := client.New(serverURL) // e.g. "http://127.0.0.1:8080"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := c.Predict(ctx, "iris", 0, []byte(`{"instances":[{"sepalLength":5.1,"sepalWidth":3.5,"petalLength":1.4,"petalWidth":0.2}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s setosa=%.4f\n", p.ModelVersion, p.Predictions[0]["setosa"])
	// Output: iris@1 setosa=0.9531
}

// The models a server serves, their versions and input contracts.
func ExampleClient_Models() {
	c := client.New(serverURL)
	models, err := c.Models(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range models {
		fmt.Printf("%s@%d: %d input fields\n", m.Name, *m.ServingVersion, len(m.Input.Fields))
	}
	// Output:
	// churn@1: 3 input fields
	// fraud@1: 4 input fields
	// iris@1: 4 input fields
}

// An error answer is an *Error with the server's stable code
// (docs/errors.md) and the field at fault.
func ExampleError() {
	c := client.New(serverURL)
	_, err := c.Predict(context.Background(), "iris", 0, []byte(`{"instances":[{"sepalLength":"long","sepalWidth":3.5,"petalLength":1.4,"petalWidth":0.2}]}`))
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Detail.Code, e.Detail.Field)
	}
	// Output: 400 invalid_argument instances[0].sepalLength
}

// A predict call with an idempotency key (X-Request-Id): the server
// answers a retry of the same id with the first answer, so the client may
// send it again when a call got no answer; a refusal with Retry-After is
// retried after the wait, within the context's deadline.
func ExampleRetryPolicy() {
	c := client.New(serverURL)
	c.Retry = client.RetryPolicy{
		Attempts: 5,
		OnRetry: func(attempt int, err error, wait time.Duration) {
			fmt.Printf("attempt %d: %v; retrying in %s\n", attempt, err, wait)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := []byte(`{"instances":[{"sepalLength":6.6,"sepalWidth":3.0,"petalLength":4.4,"petalWidth":1.4}]}`)
	first, err := c.PredictRaw(ctx, "iris", 0, body, "order-1234")
	if err != nil {
		fmt.Println(err)
		return
	}
	again, err := c.PredictRaw(ctx, "iris", 0, body, "order-1234") // a retry by hand: the same answer, replayed
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(first.Header.Get("X-Request-Id"), again.Header.Get("Idempotent-Replay"), string(first.Body) == string(again.Body))
	// Output: order-1234 true true
}

// A decision of the retry policy, without a server: a full queue asked
// for a retry in 2 s and the deadline is 5 s away.
func ExampleRetryPolicy_Decide() {
	p := client.RetryPolicy{Attempts: 3}
	now := time.Now()
	refused := &client.Error{Status: 429, RetryAfter: "2"}
	d := p.Decide(client.Attempt{N: 1, Err: refused, Now: now, Deadline: now.Add(5 * time.Second)})
	fmt.Println(d.Retry, d.Wait)
	d = p.Decide(client.Attempt{N: 3, Err: refused, Now: now, Deadline: now.Add(5 * time.Second)})
	fmt.Println(d.Retry, d.Why)
	// Output:
	// true 2s
	// false gave up after 3 attempt(s)
}
