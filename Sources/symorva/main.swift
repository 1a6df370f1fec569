print("symorva")
