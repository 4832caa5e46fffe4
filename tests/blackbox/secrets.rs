//! Secrets out of reach through the MCP server: variables with a secret
//! name or a secret value never reach a command (the red team's classes),
//! and a token of every well-known format that a command prints comes back
//! as `[REDACTED:FORMAT]`, look-alikes intact.
//!
//! The tokens here are written out, not taken from the secret-formats
//! crate, so a format dropped from the crate fails this test. All are made up.

use serde_json::json;

use crate::mcp::{Server, text};

/// `(format, text holding a token of it, the part that must not show)`.
const TOKENS: &[(&str, &str, &str)] = &[
    (
        "anthropic-key",
        "sk-ant-api03-Xq3vB8nR2kL5mT9wE1yU6iO4pA7sD0fG-hJ2kL5zX8cV1bN4mQ7wE0rT3yU6iAA",
        "sk-ant-api03-Xq3vB8nR2kL5mT9wE1yU6iO4pA7sD0fG-hJ2kL5zX8cV1bN4mQ7wE0rT3yU6iAA",
    ),
    (
        "openai-key",
        "sk-proj-4f9aB7cD2eF0gH1iJ3kL5mN7oP9qR1sT3uV5wX7yZ9",
        "sk-proj-4f9aB7cD2eF0gH1iJ3kL5mN7oP9qR1sT3uV5wX7yZ9",
    ),
    (
        "groq-key",
        "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",
        "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",
    ),
    (
        "xai-key",
        "xai-hWKYoWKV2jSH9Ckqeha812vSHooKXRTskNEzd6odFJlEaaVMBvCs2wtw3mvvjVgIIoGJQ4nUnCO8NCSf",
        "xai-hWKYoWKV2jSH9Ckqeha812vSHooKXRTskNEzd6odFJlEaaVMBvCs2wtw3mvvjVgIIoGJQ4nUnCO8NCSf",
    ),
    (
        "replicate-token",
        "r8_SHM5ia4AreOKtewJ0lUCy6OhFWmxI0HnwIuDv",
        "r8_SHM5ia4AreOKtewJ0lUCy6OhFWmxI0HnwIuDv",
    ),
    (
        "perplexity-key",
        "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",
        "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",
    ),
    (
        "huggingface-token",
        "hf_kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0sAqW",
        "hf_kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0sAqW",
    ),
    (
        "github-token",
        "ghp_R4nd0mL00k1ngT0k3nW1thTh1rtySixChr5x",
        "ghp_R4nd0mL00k1ngT0k3nW1thTh1rtySixChr5x",
    ),
    (
        "github-pat",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab",
    ),
    (
        "gitlab-token",
        "glpat-xR7kP2mN9qL4vB8tY3wZ",
        "glpat-xR7kP2mN9qL4vB8tY3wZ",
    ),
    (
        "gitlab-deploy-token",
        "gldt-6pF0eU6OKPfN1BXAVdQC",
        "gldt-6pF0eU6OKPfN1BXAVdQC",
    ),
    (
        "gitlab-runner-token",
        "glrt-wa20PEqiN8vNPoT0Hjgz",
        "glrt-wa20PEqiN8vNPoT0Hjgz",
    ),
    (
        "gitlab-trigger-token",
        "glptt-9125e48150e4bd29eeb0b585fb1756f2aa1ca398",
        "glptt-9125e48150e4bd29eeb0b585fb1756f2aa1ca398",
    ),
    (
        "npm-token",
        "npm_kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0sAqWer",
        "npm_kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0sAqWer",
    ),
    (
        "pypi-token",
        "pypi-AgEIcHlwaS5vcmcCJDk0NTZmNzA4LTk2YjAtNDY5NS1iMjMwLWUxZTZlNzYyZjY1ZAACKlsz",
        "pypi-AgEIcHlwaS5vcmcCJDk0NTZmNzA4LTk2YjAtNDY5NS1iMjMwLWUxZTZlNzYyZjY1ZAACKlsz",
    ),
    (
        "rubygems-key",
        "rubygems_edf2ed952bd110dc336037af2d452e6708035988ab9264d0",
        "rubygems_edf2ed952bd110dc336037af2d452e6708035988ab9264d0",
    ),
    (
        "docker-pat",
        "dckr_pat_FaGb5c2vWhC1fJyqq_yb-4_ykXu",
        "dckr_pat_FaGb5c2vWhC1fJyqq_yb-4_ykXu",
    ),
    (
        "slack-token",
        "xoxb-2741859306-5823019467-kQ8vR3nT6wY9zB2mL5pX7cD1",
        "xoxb-2741859306-5823019467-kQ8vR3nT6wY9zB2mL5pX7cD1",
    ),
    (
        "slack-app-token",
        "xapp-1-A09FT33S6HB-4378810905349-31dde05b067c6ac2b1522974ef37b80f59e6d964a173f27da9143c2b6505e1e1",
        "xapp-1-A09FT33S6HB-4378810905349-31dde05b067c6ac2b1522974ef37b80f59e6d964a173f27da9143c2b6505e1e1",
    ),
    (
        "slack-webhook",
        "https://hooks.slack.com/services/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",
        "hooks.slack.com/services/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",
    ),
    (
        "discord-webhook",
        "https://discord.com/api/webhooks/978171249758865917/SU9M_yCECSnNLvZ_I1Hdxo7fh5EHmotFM3HJfwh6pkFRtocDdG-Ra2kcVKmpwtwcK_fV",
        "discord.com/api/webhooks/978171249758865917/SU9M_yCECSnNLvZ_I1Hdxo7fh5EHmotFM3HJfwh6pkFRtocDdG-Ra2kcVKmpwtwcK_fV",
    ),
    (
        "telegram-bot-token",
        "9041307993:AA4brKLicTjZAqxjCCKETGTS4mZjKxjFu66",
        "AA4brKLicTjZAqxjCCKETGTS4mZjKxjFu66",
    ),
    (
        "sendgrid-key",
        "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",
        "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",
    ),
    (
        "mailgun-key",
        "key-d3b66c52f171af11e43fd137dbcfe0c3",
        "key-d3b66c52f171af11e43fd137dbcfe0c3",
    ),
    (
        "twilio-api-key",
        "SK6f879ed1fce63984133bedfc7d492e8d",
        "SK6f879ed1fce63984133bedfc7d492e8d",
    ),
    (
        "twilio-account-sid",
        "ACf11f0f28558fefcd3e7f0d61ca289fb7",
        "ACf11f0f28558fefcd3e7f0d61ca289fb7",
    ),
    (
        "stripe-key",
        "sk_live_51HbQ7xKz9vR3nT6wY9zB2mL5pX",
        "sk_live_51HbQ7xKz9vR3nT6wY9zB2mL5pX",
    ),
    (
        "stripe-webhook-secret",
        "whsec_SLhFPjvDv9rVVmLvqmXAGDIieBPBz2OR",
        "whsec_SLhFPjvDv9rVVmLvqmXAGDIieBPBz2OR",
    ),
    (
        "square-token",
        "sq0atp-IL_galVePzo0FrJ4-HfldK",
        "sq0atp-IL_galVePzo0FrJ4-HfldK",
    ),
    (
        "shopify-access-token",
        "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",
        "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",
    ),
    (
        "shopify-shared-secret",
        "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",
        "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",
    ),
    (
        "aws-access-key-id",
        "AKIAIOSFODNN7EXAMPLE",
        "AKIAIOSFODNN7EXAMPLE",
    ),
    (
        "aws-secret-key",
        "aws_secret_access_key = XR33uipr3ysK/XQwIQlmj+v1dbbxG/cN9p+0YXPP",
        "XR33uipr3ysK/XQwIQlmj+v1dbbxG/cN9p+0YXPP",
    ),
    (
        "google-api-key",
        "AIzaSyA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tUvW",
        "AIzaSyA1bC2dE3fG4hI5jK6lM7nO8pQ9rS0tUvW",
    ),
    (
        "google-oauth-token",
        "ya29.a0AfH6SMBx3kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0",
        "ya29.a0AfH6SMBx3kQ8vR3nT6wY9zB2mL5pX7cD1fG4hJ0",
    ),
    (
        "gcp-service-account-key",
        "\"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\\n-----END PRIVATE KEY-----\\n\"",
        "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\\n-----END PRIVATE KEY-----\\n",
    ),
    (
        "azure-storage-key",
        "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey=8TysKoEx0zTPE18yJi4BohxVcp9xELN44FlROcAndF8D+AyduTTy/2HPiIfFM4i+cPdn9kFr7ReFbb0ymSvAgL==;EndpointSuffix=core.windows.net",
        "8TysKoEx0zTPE18yJi4BohxVcp9xELN44FlROcAndF8D+AyduTTy/2HPiIfFM4i+cPdn9kFr7ReFbb0ymSvAgL==",
    ),
    (
        "azure-shared-access-key",
        "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=d1oTAQ3uO7lwTAyw+3Okcy54L3fwJEKDzsYodmzAuAZ=",
        "d1oTAQ3uO7lwTAyw+3Okcy54L3fwJEKDzsYodmzAuAZ=",
    ),
    (
        "digitalocean-token",
        "dop_v1_78073d03878e7f475f2bf0a07c6b815b4692732364a05799f5433cae072ab441",
        "dop_v1_78073d03878e7f475f2bf0a07c6b815b4692732364a05799f5433cae072ab441",
    ),
    (
        "heroku-api-key",
        "HRKU-AAa7LZMmBqgs53BrogvUSSkzX8wL5s7ngTgE6VAtGwl7O150RPPXzXI-E2P9",
        "HRKU-AAa7LZMmBqgs53BrogvUSSkzX8wL5s7ngTgE6VAtGwl7O150RPPXzXI-E2P9",
    ),
    (
        "vault-token",
        "hvs.CAESIMuXo0JHU53e8U29F_4emOKB983-6vWSQDznXtJZKV17PHYaL2q5LbGF51v_JXCwnaNq9a-MySlsPoZikLUDbEPgO84",
        "hvs.CAESIMuXo0JHU53e8U29F_4emOKB983-6vWSQDznXtJZKV17PHYaL2q5LbGF51v_JXCwnaNq9a-MySlsPoZikLUDbEPgO84",
    ),
    (
        "doppler-token",
        "dp.pt.IeMr5zFxHpWM7eeje3tZCOx4NLhg64jLEMBFrZWVTfo",
        "dp.pt.IeMr5zFxHpWM7eeje3tZCOx4NLhg64jLEMBFrZWVTfo",
    ),
    (
        "pulumi-token",
        "pul-ee7e7b1f991a39aa9f750cf4721b02cb8d490bf9",
        "pul-ee7e7b1f991a39aa9f750cf4721b02cb8d490bf9",
    ),
    (
        "terraform-cloud-token",
        "rAKAiLKCoB0Wvq.atlasv1.Ld18LBJoFdMoQkqfyU0I5rEu4iKTKksLj_mOPzfZRRxMclROWOn_kONWNEUBa96_Q9T",
        "Ld18LBJoFdMoQkqfyU0I5rEu4iKTKksLj_mOPzfZRRxMclROWOn_kONWNEUBa96_Q9T",
    ),
    (
        "planetscale-token",
        "pscale_tkn_xeEQhUiDjRrHv2RbwswOv5lU6_dRfC2wS2125hsfjhn",
        "pscale_tkn_xeEQhUiDjRrHv2RbwswOv5lU6_dRfC2wS2125hsfjhn",
    ),
    (
        "supabase-token",
        "sbp_290eb22983dfebc395b457b3f886fc328f6b2cec",
        "sbp_290eb22983dfebc395b457b3f886fc328f6b2cec",
    ),
    (
        "netlify-token",
        "nfp_jEga5vOCr4VK4xuvhChSNCQL2W0LyBvsXr2T",
        "nfp_jEga5vOCr4VK4xuvhChSNCQL2W0LyBvsXr2T",
    ),
    (
        "grafana-service-account-token",
        "glsa_6rALTOuvVm9HFfiaMnHdP4KnK5wpHK5f_0e7f5bc2",
        "glsa_6rALTOuvVm9HFfiaMnHdP4KnK5wpHK5f_0e7f5bc2",
    ),
    (
        "grafana-cloud-token",
        "glc_eyJvIjoid2vQ6/HWpCeaKYk1wT62i0Wsb8JRDbJqCAp5HGIrE0mkvU4lVhZm0VrdyCJp==",
        "glc_eyJvIjoid2vQ6/HWpCeaKYk1wT62i0Wsb8JRDbJqCAp5HGIrE0mkvU4lVhZm0VrdyCJp==",
    ),
    (
        "newrelic-key",
        "NRAK-33FD2V18H38KZAUFYVF0IW3XQOC",
        "NRAK-33FD2V18H38KZAUFYVF0IW3XQOC",
    ),
    (
        "sentry-token",
        "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",
        "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",
    ),
    (
        "dynatrace-token",
        "dt0c01.3QSZ6HJDBUKVYB0S9B4IFSG3.INK750P3M9O32FLD3X2LLLG2AEGOPPF3VOWNGT7R7G0X3Z8ORCOOLHQV3O5Q9K71",
        "dt0c01.3QSZ6HJDBUKVYB0S9B4IFSG3.INK750P3M9O32FLD3X2LLLG2AEGOPPF3VOWNGT7R7G0X3Z8ORCOOLHQV3O5Q9K71",
    ),
    (
        "atlassian-token",
        "ATATT3xFfGF0XEZhb4HEqxo_xiTQb4Ji5A4ENF5FFrD7uqp3F3uV_sbbdNju_XyLyNMGoYOA76mvWE6afv9ZZcaet3AODCAvwmCieR9p97KEttf002AFAq-DjUAM2jA9kX2Op-3vWzBFOGFT_uhSwR0o4hs5NL01akLSpDhVrLa688ieu0q6Bi=9O6CCBO1",
        "ATATT3xFfGF0XEZhb4HEqxo_xiTQb4Ji5A4ENF5FFrD7uqp3F3uV_sbbdNju_XyLyNMGoYOA76mvWE6afv9ZZcaet3AODCAvwmCieR9p97KEttf002AFAq-DjUAM2jA9kX2Op-3vWzBFOGFT_uhSwR0o4hs5NL01akLSpDhVrLa688ieu0q6Bi=9O6CCBO1",
    ),
    (
        "linear-api-key",
        "lin_api_SZ0MVaF0p0WePeIYgYRcf6HMRhr0tz6TPl0ly3yM",
        "lin_api_SZ0MVaF0p0WePeIYgYRcf6HMRhr0tz6TPl0ly3yM",
    ),
    (
        "notion-token",
        "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",
        "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",
    ),
    (
        "postman-api-key",
        "PMAK-d9b16e4b80ad521dcece65e4-e725df482e4e93eba52e1ed55a4c55473b",
        "PMAK-d9b16e4b80ad521dcece65e4-e725df482e4e93eba52e1ed55a4c55473b",
    ),
    (
        "mapbox-secret-token",
        "sk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjHEqVdIqKb7In0.qN8WIAjI5CpUixz2smO7mg",
        "sk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjHEqVdIqKb7In0.qN8WIAjI5CpUixz2smO7mg",
    ),
    (
        "age-secret-key",
        "AGE-SECRET-KEY-1HUALEZ7AQ64E7F61YV6MT3TIWEM31ZEVN3J49AHSNRM99ONCIUAATEQV1C",
        "AGE-SECRET-KEY-1HUALEZ7AQ64E7F61YV6MT3TIWEM31ZEVN3J49AHSNRM99ONCIUAATEQV1C",
    ),
    (
        "private-key",
        "-----BEGIN RSA PRIVATE KEY-----\nGuo6MQ7xXacdekPv1M3Kf9VIkksrjndb9M5X2ggltj5LFyIMi8po6y4T/8lhrScJ\n1QZR9UB7KdsFWjYqE1E6kSu7AwsB1+Y3PuM9D6dcsfJZh1P1Mj7uDL8KCOQx6mYs\nvZORjIgXR6WdmDpzFsbcd+/uEIZX4j6yr7yeKTmn2xHzydNNihTA/qu/ZTh7/nXV\n-----END RSA PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----\nGuo6MQ7xXacdekPv1M3Kf9VIkksrjndb9M5X2ggltj5LFyIMi8po6y4T/8lhrScJ\n1QZR9UB7KdsFWjYqE1E6kSu7AwsB1+Y3PuM9D6dcsfJZh1P1Mj7uDL8KCOQx6mYs\nvZORjIgXR6WdmDpzFsbcd+/uEIZX4j6yr7yeKTmn2xHzydNNihTA/qu/ZTh7/nXV\n-----END RSA PRIVATE KEY-----",
    ),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ.XGVSZhbJjJEAHmGG-5323O34S8ix3P5cvA8aav5EfN3",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkphbmUifQ.XGVSZhbJjJEAHmGG-5323O34S8ix3P5cvA8aav5EfN3",
    ),
    (
        "bearer-token",
        "Authorization: Bearer CsMj0kYPiKFofGHMS88KZ09xCV8Z6lrlqGApoQhA",
        "CsMj0kYPiKFofGHMS88KZ09xCV8Z6lrlqGApoQhA",
    ),
    (
        "basic-auth",
        "Authorization: Basic YWRtaW46o4JnGjW9KxwOgs0F==",
        "YWRtaW46o4JnGjW9KxwOgs0F==",
    ),
    (
        "password-value",
        "Server=db.internal;Database=app;User Id=app;Password=Sup3r-s3cret!;",
        "Sup3r-s3cret!",
    ),
    (
        "url-password",
        "postgres://app:s3cr3t-Passw0rd@db.internal:5432/app",
        "s3cr3t-Passw0rd",
    ),
];

/// Text that looks like a token and must come back unchanged.
const LOOK_ALIKES: &[&str] = &[
    "pip install sk-learn==0.24.2",
    "task-0123456789abcdefghijklmn",
    "npm_config_cache=/root/.npm",
    "self.hf_config_dictionary_for_the_model_loader",
    "risk_live_51HbQ7xKz9vR3nT6wY9zB2mL5pX",
    "XAKIAIOSFODNN7EXAMPLE",
    "monkey-d3b66c52f171af11e43fd137dbcfe0c3",
    "TASK6f879ed1fce63984133bedfc7d492e8d",
    "ACCEPT_EULA=Y",
    "rapidapi084d7254c470754f60da7a9638314c27",
    "secret_key_base",
    "POST to https://hooks.slack.com/services/YOUR/WEBHOOK/URL",
    "https://discord.com/api/webhooks/{id}/{token}",
    "port:AA4brKLicTjZAqxjCCKETGTS4mZjKxjFu66",
    "-----BEGIN CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    "Bearer authentication is described in RFC 6750",
    "Authorization: Bearer $API_TOKEN",
    "password=$DB_PASSWORD",
    "Password=<your password>",
    "https://example.com:8080/path",
    "ssh://git@github.com/owner/repo.git",
    "3f786850e387550fdab836ed7e6dc881de23001b",
    "123e4567-e89b-12d3-a456-426614174000",
];

/// Secret by name: the red team's unscrubbed names and the contract's.
/// No value has a secret form, so only the name can scrub them.
const SECRET_NAMES: &[&str] = &[
    "MYSQL_PWD",
    "STRIPE_SIGNING_KEY",
    "ENCRYPTION_KEY",
    "SESSION_COOKIE",
    "SLACK_WEBHOOK_URL",
    "DISCORD_WEBHOOK",
    "ID_JWT",
    "AZURE_STORAGE_CONNECTION_STRING",
    "SQL_CONNSTRING",
    "GPG_PASSPHRASE",
    "BASIC_AUTH",
    "PROXY_AUTH_HEADER",
    "HTTP_AUTHORIZATION",
    "DOCKER_CREDENTIALS",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GITHUB_TOKEN",
    "DB_PASSWORD",
    "SMTP_PASS",
    "CLIENT_SECRET",
    "AWS_SECRET_ACCESS_KEY",
    "SENTRY_DSN",
    "DATABASE_URL",
    "GITLAB_PAT",
];

/// Secret by value, under names that say nothing: the formats the red team
/// found reaching commands.
const SECRET_VALUE_FORMATS: &[&str] = &[
    "jwt",
    "private-key",
    "slack-webhook",
    "discord-webhook",
    "azure-storage-key",
    "bearer-token",
    "basic-auth",
    "url-password",
    "password-value",
    "github-token",
    "aws-access-key-id",
    "telegram-bot-token",
    "gcp-service-account-key",
];

/// Names and values that look secret but are not: they stay.
const KEPT: &[(&str, &str)] = &[
    ("KEYBOARD", "us-intl"),
    ("PRIMARY_KEY_COLUMN", "id"),
    ("SSH_AUTH_SOCK", "/tmp/ssh-XXXXabcd/agent.1234"),
    ("XAUTHORITY", "/root/.Xauthority"),
    ("GIT_AUTHOR_NAME", "Jane Doe"),
    ("TOKENIZERS_PARALLELISM", "false"),
    ("GPG_TTY", "/dev/pts/0"),
    ("HISTCONTROL", "ignoredups"),
    (
        "SSH_PUBLIC_KEY",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoq user@host",
    ),
    ("HOME_PAGE", "https://example.com:8080/"),
    ("NEWS", "Bearer of good news"),
];

fn token(format: &str) -> &'static str {
    TOKENS
        .iter()
        .find(|(id, _, _)| *id == format)
        .map_or_else(|| panic!("no token for {format}"), |(_, text, _)| *text)
}

#[test]
fn secret_names_and_values_never_reach_a_command_and_look_alikes_do() {
    let dir = tempfile::tempdir().expect("temp dir");
    let named: Vec<(String, String)> = SECRET_NAMES
        .iter()
        .map(|name| ((*name).to_owned(), format!("plain-value-of-{name}-0123")))
        .collect();
    let valued: Vec<(String, String)> = SECRET_VALUE_FORMATS
        .iter()
        .enumerate()
        .map(|(n, format)| (format!("SETTING_{n}"), token(format).to_owned()))
        .collect();
    let kept: Vec<(String, String)> = KEPT
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    let env: Vec<(&str, &str)> = named
        .iter()
        .chain(&valued)
        .chain(&kept)
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let mut server = Server::start_with_env(&["--cwd", dir.path().to_str().expect("utf-8")], &env);
    let names: Vec<&str> = env.iter().map(|(name, _)| *name).collect();
    let answer = text(&server.call(
        "Bash",
        json!({ "command": format!(
            "for n in {}; do if [ -n \"${{!n+x}}\" ]; then echo \"set:$n\"; else echo \"unset:$n\"; fi; done",
            names.join(" ")
        ) }),
    ));
    for (name, _) in named.iter().chain(&valued) {
        assert!(
            answer.contains(&format!("unset:{name}\n")),
            "{name} reached the command:\n{answer}"
        );
    }
    for (name, value) in &kept {
        assert!(
            answer.contains(&format!("set:{name}\n")),
            "{name} was scrubbed:\n{answer}"
        );
        let echoed = text(&server.call(
            "Bash",
            json!({ "command": format!("printf '%s' \"${name}\"") }),
        ));
        assert_eq!(&echoed, value, "{name} keeps its value");
    }
    assert!(server.close().success());
}

#[test]
fn a_token_of_every_format_is_redacted_from_output_and_look_alikes_stay() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut file = String::new();
    for (format, token, _) in TOKENS {
        file.push_str(&format!("{format}: {token}\n"));
    }
    for look_alike in LOOK_ALIKES {
        file.push_str(&format!("kept: {look_alike}\n"));
    }
    std::fs::write(dir.path().join("tokens.txt"), &file).expect("write the file");
    let mut server = Server::start(&["--cwd", dir.path().to_str().expect("utf-8")]);
    // The formats compile on a warm-up thread; a debug build on a loaded
    // machine can take over a second for all of them, and a reader still
    // compiling a second after its command ended is cut off. The first
    // call waits that out; the second is the one checked.
    let _ = server.call("Bash", json!({ "command": "cat tokens.txt" }));
    let answer = text(&server.call("Bash", json!({ "command": "cat tokens.txt" })));
    // The look-alikes hold tokens inside longer words: look for the
    // secrets in the tokens' part only.
    let tokens_part = answer.split("\nkept: ").next().unwrap_or_default();
    let mut missed = Vec::new();
    for (format, _, secret) in TOKENS {
        let redacted = tokens_part.lines().any(|line| {
            line.starts_with(&format!("{format}: "))
                && line.contains(&format!("[REDACTED:{format}]"))
        });
        if tokens_part.contains(secret) || !redacted {
            missed.push(*format);
        }
    }
    assert!(missed.is_empty(), "not redacted: {missed:?}\n{answer}");
    for look_alike in LOOK_ALIKES {
        assert!(
            answer.contains(&format!("kept: {look_alike}\n")),
            "{look_alike} changed:\n{answer}"
        );
    }
    assert!(TOKENS.len() >= 44, "{} formats", TOKENS.len());
    assert!(server.close().success());
}
