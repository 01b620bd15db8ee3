package main

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A picker that refuses dials for several seconds (a standby before it leads) is reached within
// about a second of listening: the stand-in's dials back off to at most 1 s, not gRPC's default
// (by then about 4 s, growing to 120 s), which left a hand-over unrouted for half a minute.
func TestPickerDialsBackOffAtMostASecond(t *testing.T) {
	reserved, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := reserved.Addr().String()
	reserved.Close() // refused from here on, until the server below listens on the same address

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), pickerBackoff)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	refusedUntil := time.Now().Add(6 * time.Second)
	for time.Now().Before(refusedUntil) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil {
			t.Fatal("a dial succeeded with nothing listening")
		}
		time.Sleep(100 * time.Millisecond)
	}

	listener, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address was taken meanwhile: %v", err)
	}
	server := grpc.NewServer()
	healthpb.RegisterHealthServer(server, health.NewServer())
	go server.Serve(listener) //nolint:errcheck
	defer server.Stop()
	listening := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil {
			break
		}
		if time.Since(listening) > 2*time.Second {
			t.Fatalf("not reached %s after the picker listened: %v", time.Since(listening), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
