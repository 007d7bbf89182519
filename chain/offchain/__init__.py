"""Off-chain code: chain backends and pycardano transaction builders."""
