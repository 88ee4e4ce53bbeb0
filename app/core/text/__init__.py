"""What happens to the engine's text before it is written anywhere: spoken commands, vocabulary, joining, cleanup."""
