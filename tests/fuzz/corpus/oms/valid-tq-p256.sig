{
  "dsseEnvelope": {
    "payload": "ewogICJfdHlwZSI6ICJodHRwczovL2luLXRvdG8uaW8vU3RhdGVtZW50L3YxIiwKICAicHJlZGljYXRlIjogewogICAgInJlc291cmNlcyI6IFt7CiAgICAgICAgImFsZ29yaXRobSI6ICJzaGEyNTYiLAogICAgICAgICJkaWdlc3QiOiAiY2EzZDE2M2JhYjA1NTM4MTgyNzIyNjE0MDU2OGYzYmVmN2VhYWMxODdjZWJkNzY4NzhlMGI2M2U5ZTQ0MjM1NiIsCiAgICAgICAgIm5hbWUiOiAiY29uZmlnLmpzb24iCiAgICAgIH0sIHsKICAgICAgICAiYWxnb3JpdGhtIjogInNoYTI1NiIsCiAgICAgICAgImRpZ2VzdCI6ICIxYjQ2NWZhNmI2YmNiYzA2YTMxOTllM2QyZDhhZWMzNWQzNzQ5NGE3MTJmODg4YjZkNTUzNjY4NGRkODlkMGYwIiwKICAgICAgICAibmFtZSI6ICJ3LmJpbiIKICAgICAgfV0sCiAgICAic2VyaWFsaXphdGlvbiI6IHsKICAgICAgImFsbG93X3N5bWxpbmtzIjogZmFsc2UsCiAgICAgICJoYXNoX3R5cGUiOiAic2hhMjU2IiwKICAgICAgImlnbm9yZV9wYXRocyI6IFsiLmdpdCIsICIuZ2l0YXR0cmlidXRlcyIsICIuZ2l0aHViIiwgIi5naXRpZ25vcmUiLCAiU0hBMjU2U1VNUyIsICJ0cS1tYW5pZmVzdC5qc29uIl0sCiAgICAgICJtZXRob2QiOiAiZmlsZXMiCiAgICB9CiAgfSwKICAicHJlZGljYXRlVHlwZSI6ICJodHRwczovL21vZGVsX3NpZ25pbmcvc2lnbmF0dXJlL3YxLjAiLAogICJzdWJqZWN0IjogW3sKICAgICAgImRpZ2VzdCI6IHsKICAgICAgICAic2hhMjU2IjogIjJiZDg1ZTVhMjQ3ZDgxZTE0M2QyODc3MGM5OTRhNGU1YmRkZWVlYWFmZWYxYWFlNjQxNTMzZDg0MGFlMWZlMWMiCiAgICAgIH0sCiAgICAgICJuYW1lIjogIm0iCiAgICB9XQp9Cg==",
    "payloadType": "application/vnd.in-toto+json",
    "signatures": [{
        "keyid": "",
        "sig": "MEYCIQDZhmXAQvCTl3Gz2nO0uensDZMnH7GhHpZqLFfcWWBiPQIhAL6l/9hUf09rHJEvXo/6G++UWy+OVsADxkl23pRqg8qz"
      }]
  },
  "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
  "verificationMaterial": {
    "publicKey": {
      "hint": "71330896a2f12d3a28f1f878abafc98730cc07902aabe92c6368429c9ecbb2eb"
    },
    "tlogEntries": []
  }
}
