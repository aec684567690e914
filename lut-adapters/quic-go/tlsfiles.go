package main

// TLS files as nesquic hands them over (docs/protocol.md): a DER certificate (also the client's
// only trust anchor) and a DER PKCS#8 key. PEM is accepted too, for hand-made files.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

const (
	alpn       = "nesquic"
	serverName = "localhost"
)

// readDER reads a DER file, or the first block of a PEM file.
func readDER(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if block, _ := pem.Decode(b); block != nil {
		return block.Bytes, nil
	}
	return b, nil
}

func serverTLS(certPath, keyPath string) (*tls.Config, error) {
	cert, err := readDER(certPath)
	if err != nil {
		return nil, fmt.Errorf("certificate: %w", err)
	}
	keyDER, err := readDER(keyPath)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("key %s: not a PKCS#8 private key: %w", keyPath, err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{cert}, PrivateKey: key}},
		NextProtos:   []string{alpn},
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// clientTLS trusts exactly the certificate in caPath and verifies the server against it.
func clientTLS(caPath string) (*tls.Config, error) {
	der, err := readDER(caPath)
	if err != nil {
		return nil, fmt.Errorf("trust anchor: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("trust anchor %s: not a certificate: %w", caPath, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return &tls.Config{
		RootCAs:    roots,
		ServerName: serverName,
		NextProtos: []string{alpn},
		MinVersion: tls.VersionTLS13,
	}, nil
}
